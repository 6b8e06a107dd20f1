"""The Agent aggregate's approvals: a call parked for a person's answer, the answer, expiry.

Its own module because approvals are one concern of the Agent stream with their own rules
(who may answer, for which arguments, how many, until when); ``Agent`` inherits these operations
and handlers.
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
    DigestMismatch,
    InvalidAnswer,
    SameApprover,
    SelfApproval,
    UnknownApproval,
)
from events.argument_digest import arguments_digest
from events.catalog import ApprovalKind, LedgerEvent
from events.streams import approval_id_for, now

MAX_ANSWER_CHARS = 2000
"""The longest free-text answer to a question."""


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
        approvals_required: int = 1,
        kind: ApprovalKind = "call",
    ) -> str:
        """Record that a call waits for approval (or, a question, for an answer), bound to the
        digest of its arguments; its id (the same for the same call)."""
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
            digest=arguments_digest(arguments),
            approvals_required=approvals_required,
            kind=kind,
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
        *,
        digest: str,
        related: Collection[str] = (),
        principal: str | None = None,
        answer: str | None = None,
    ) -> Approval:
        """Record ``by``'s answer for the arguments of ``digest``; the approval as answered.
        A question takes an ``answer`` (a grant with it), a call a yes or no (InvalidAnswer).
        Nothing is recorded, and an ApprovalClosed says why, when there is nothing to answer
        (unknown, answered, expired), ``by`` may not answer it (not among its approvers; the
        agent itself, its parent, a sub-agent or ``related``, its spawn tree: SelfApproval), the
        digest is not that of the arguments it shows (DigestMismatch), or ``by``'s grant already
        stands (SameApprover: one ``principal``, the token that authenticated it, counts once
        whatever ``by`` says). A grant short of ``approvals_required`` leaves it pending."""
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
        if by in self._spawn_tree(related):
            raise SelfApproval(
                f"{by!r} is agent {self.state.agent_id!r} or of its spawn tree: an agent may"
                f" not answer its own approval {approval_id}"
            )
        shown = approval.shown()[1]
        if digest != shown:
            raise DigestMismatch(
                f"approval {approval_id} shows arguments of digest {shown}, not {digest!r}:"
                " read it again (owlclaw approvals) and answer what it shows"
            )
        _check_answer(approval_id, approval, approve, answer, arguments)
        if approve:
            self._grant(approval_id, approval, by, note, arguments, principal, answer)
        else:
            self.record(
                ev.ApprovalDenied, approval_id=approval_id, by=by, note=note, principal=principal
            )
        return approval

    def _spawn_tree(self, related: Collection[str]) -> set[str]:
        state = self.state
        children = {s.child_agent_id for s in state.spawns.values()}
        return {state.agent_id, state.parent_agent_id, *children, *related} - {""}

    def _grant(
        self,
        approval_id: str,
        approval: Approval,
        by: str,
        note: str,
        arguments: dict[str, Any] | None,
        principal: str | None,
        answer: str | None,
    ) -> None:
        shown = approval.shown()[1]
        granted = shown if arguments is None else arguments_digest(arguments)
        edited = granted != shown
        if not edited and (by in approval.granted_by or (principal or by) in approval.granters):
            raise SameApprover(
                f"{by!r} already granted approval {approval_id}: it needs"
                f" {approval.approvals_required} different approvers"
            )
        standing = 1 if edited else len(approval.granted_by) + 1
        self.record(
            ev.ApprovalGranted,
            approval_id=approval_id,
            by=by,
            note=note,
            arguments=arguments if edited else None,
            digest=granted,
            awaiting=max(0, approval.approvals_required - standing),
            principal=principal,
            answer=answer,
        )

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
            digest=e.digest,
            approvals_required=e.approvals_required,
            kind=e.kind,
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
        approval = self.state.approvals.get(e.approval_id)
        if approval is None or approval.status != "pending":
            return
        if e.arguments is not None:  # an edit: grants for the arguments shown before lapse
            approval.edited_arguments, approval.granted_by = dict(e.arguments), []
            approval.granters = []
        approval.granted_by.append(e.by)
        approval.granters.append(e.principal or e.by)
        approval.by, approval.note, approval.answer = e.by, e.note, e.answer
        if e.awaiting == 0:
            self._answered(e.approval_id, "granted", e)

    def _on_ApprovalDenied(self, e: ev.ApprovalDenied) -> None:
        if (approval := self._answered(e.approval_id, "denied", e)) is not None:
            approval.by, approval.note = e.by, e.note

    def _on_ApprovalExpired(self, e: ev.ApprovalExpired) -> None:
        self._answered(e.approval_id, "expired", e)


def _check_answer(
    approval_id: str,
    approval: Approval,
    approve: bool,
    answer: str | None,
    arguments: dict[str, Any] | None,
) -> None:
    """InvalidAnswer unless the answer fits what was asked: a yes or no for a call; for a
    question, text (one of its options when it has any, else at most MAX_ANSWER_CHARS)."""
    if approval.kind == "call":
        if answer is not None:
            raise InvalidAnswer(f"approval {approval_id} is of a call: approve or deny it")
        return
    if not approve or answer is None or arguments is not None:
        raise InvalidAnswer(
            f"approval {approval_id} is a question: answer it (owlclaw answer {approval_id} TEXT)"
        )
    if approval.options and answer not in approval.options:
        raise InvalidAnswer(
            f"{answer!r} is not one of the options of question {approval_id}: "
            + ", ".join(repr(o) for o in approval.options)
        )
    if not answer.strip() or len(answer) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(
            f"an answer to question {approval_id} is non-blank text of at most"
            f" {MAX_ANSWER_CHARS} characters (this one has {len(answer)})"
        )
