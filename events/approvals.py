"""The Agent aggregate's approvals: a call parked for a person's answer, the answer, expiry.

Its own module because approvals are one concern of the Agent stream with their own rules
(who may answer, until when); ``Agent`` inherits these operations and handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from events import catalog as ev
from events.agent_state import (
    ANSWERED_APPROVALS_KEPT,
    AgentState,
    Approval,
    ApprovalClosed,
    UnknownApproval,
)
from events.catalog import LedgerEvent
from events.streams import approval_id_for, now


class AgentApprovals:
    """The approval operations and event handlers of ``events.agent.Agent``."""

    state: AgentState
    record: Callable[..., LedgerEvent]

    def request_approval(
        self,
        run_id: UUID,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        approvers: Collection[str],
        timeout_s: float,
    ) -> str:
        """Record that a call waits for approval; its id (the same for the same call)."""
        approval_id = approval_id_for(run_id, call_id)
        self.record(
            ev.ApprovalRequested,
            approval_id=approval_id,
            agent_id=self.state.agent_id,
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            reason=reason,
            approvers=list(approvers),
            expires_at=now() + timedelta(seconds=timeout_s),
        )
        return approval_id

    def approval_for(self, run_id: UUID, call_id: str) -> Approval | None:
        return self.state.approvals.get(approval_id_for(run_id, call_id))

    def answer_approval(
        self,
        approval_id: str,
        approve: bool,
        by: str,
        note: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> Approval:
        """Record a person's answer; ApprovalClosed when there is nothing to answer (unknown,
        answered, past its expiry) or ``by`` may not answer it. The approval as answered."""
        approval = self.state.approvals.get(approval_id)
        if approval is None:
            raise UnknownApproval(f"no approval {approval_id!r} for agent {self.state.agent_id}")
        if approval.status == "pending" and approval.expires_at <= now():
            raise ApprovalClosed(f"approval {approval_id} expired at {approval.expires_at}")
        if approval.status != "pending":
            raise ApprovalClosed(f"approval {approval_id} is already {approval.status}")
        if approval.approvers and by not in approval.approvers:
            raise ApprovalClosed(
                f"{by!r} may not answer approval {approval_id} (approvers: "
                f"{', '.join(approval.approvers)})"
            )
        if approve:
            self.record(
                ev.ApprovalGranted, approval_id=approval_id, by=by, note=note, arguments=arguments
            )
        else:
            self.record(ev.ApprovalDenied, approval_id=approval_id, by=by, note=note)
        return approval

    def expire_approvals(self, at: datetime) -> list[UUID]:
        """Record ApprovalExpired for pending approvals past their time; their runs."""
        due = [
            (approval_id, a.run_id)
            for approval_id, a in self.state.approvals.items()
            if a.status == "pending" and a.expires_at <= at
        ]
        for approval_id, _ in due:
            self.record(ev.ApprovalExpired, approval_id=approval_id)
        return [run_id for _, run_id in due]

    def pending_approvals(self) -> list[tuple[str, Approval]]:
        return [(i, a) for i, a in self.state.approvals.items() if a.status == "pending"]

    def _on_ApprovalRequested(self, e: ev.ApprovalRequested) -> None:
        self.state.approvals[e.approval_id] = Approval(
            run_id=e.run_id,
            call_id=e.call_id,
            tool=e.tool,
            arguments=dict(e.arguments),
            reason=e.reason,
            approvers=list(e.approvers),
            requested_at=e.timestamp,
            expires_at=e.expires_at,
        )

    def _answered(
        self, approval_id: str, status: Literal["granted", "denied", "expired"], e: LedgerEvent
    ) -> Approval | None:
        approval = self.state.approvals.get(approval_id)
        if approval is None or approval.status != "pending":
            return None
        approval.status, approval.answered_at = status, e.timestamp
        answered = [i for i, a in self.state.approvals.items() if a.status != "pending"]
        for old in answered[: max(0, len(answered) - ANSWERED_APPROVALS_KEPT)]:
            del self.state.approvals[old]
        return approval

    def _on_ApprovalGranted(self, e: ev.ApprovalGranted) -> None:
        if (approval := self._answered(e.approval_id, "granted", e)) is not None:
            approval.by, approval.note = e.by, e.note
            approval.edited_arguments = dict(e.arguments) if e.arguments is not None else None

    def _on_ApprovalDenied(self, e: ev.ApprovalDenied) -> None:
        if (approval := self._answered(e.approval_id, "denied", e)) is not None:
            approval.by, approval.note = e.by, e.note

    def _on_ApprovalExpired(self, e: ev.ApprovalExpired) -> None:
        self._answered(e.approval_id, "expired", e)
