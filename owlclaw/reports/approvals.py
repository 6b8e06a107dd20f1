"""What ``owlclaw approvals``, ``GET /approvals`` and the console list: the pending approvals of
agents read from their streams. Apart from the runtime's answering of them, so that a CLI asking
a server decodes its answer without importing the tools and the ledger's driver."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from events.agent_state import Approval

if TYPE_CHECKING:
    from events import Ledger


class PendingApproval(msgspec.Struct, frozen=True):
    """What ``owlclaw approvals`` and ``GET /approvals`` list: the arguments an answer is
    for now (an earlier approver's edit, else the call's) and their ``digest``, which the
    answer sends back."""

    approval_id: str
    agent_id: str
    run_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    approvers: list[str]
    requested_at: str
    expires_at: str
    digest: str = ""
    approvals_required: int = 1
    granted_by: list[str] = []
    kind: str = "call"
    """``question``: ask_human's (``arguments`` hold the question and its options), answered
    with ``owlclaw answer``; ``call``: approved or denied."""

    @classmethod
    def of(cls, agent_id: str, approval_id: str, approval: Approval) -> PendingApproval:
        arguments, digest = approval.shown()
        return cls(
            approval_id,
            agent_id,
            str(approval.run_id),
            approval.tool,
            arguments,
            approval.reason,
            approval.approvers,
            approval.requested_at.isoformat(),
            approval.expires_at.isoformat(),
            digest,
            approval.approvals_required,
            list(approval.granted_by),
            approval.kind,
        )


def pending(ledger: Ledger, agent_ids: list[str]) -> list[PendingApproval]:
    """The pending approvals of these agents, oldest first."""
    found = []
    for agent_id in agent_ids:
        agent = ledger.load_agent(agent_id)
        found += [PendingApproval.of(agent_id, i, a) for i, a in agent.pending_approvals()]
    return sorted(found, key=lambda p: p.requested_at)


def unique_prefixes(ids: list[str], among: Iterable[str], shortest: int = 8) -> dict[str, str]:
    """Each of ``ids`` cut to its shortest prefix (at least ``shortest`` characters) that no
    other id of ``among`` starts with."""
    others = sorted(set(among) | set(ids))
    prefixes = {}
    for approval_id in ids:
        length = shortest
        while length < len(approval_id) and any(
            o != approval_id and o.startswith(approval_id[:length]) for o in others
        ):
            length += 1
        prefixes[approval_id] = approval_id[:length]
    return prefixes


class Approvals(msgspec.Struct, frozen=True):
    """``owlclaw approvals``: the pending approvals, oldest first; each one's shortest unique id
    prefix (among every approval of the agents listed, answered or not); those whose agent a
    server serves (answered at once)."""

    pending: list[PendingApproval]
    short: dict[str, str]
    served: list[str]


def approvals_of(led: Ledger, agent_id: str | None, served: Collection[str]) -> Approvals:
    """One agent's (UnknownAgent when there is none) or every agent's pending approvals;
    ``served``: the agents a server serves."""
    agent_ids = [agent_id] if agent_id else led.agent_ids()
    found = pending(led, agent_ids)
    known = [a for a_id in agent_ids for a in led.load_agent(a_id).state.approvals]
    return Approvals(
        found,
        unique_prefixes([p.approval_id for p in found], known),
        [p.approval_id for p in found if p.agent_id in served],
    )
