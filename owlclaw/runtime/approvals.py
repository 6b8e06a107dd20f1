"""Answering approvals: a person says yes or no to a call a run parked at.

Like every write that reaches an agent, an answer goes through the agent's one writer when
``owlclaw run`` serves it (``Inbox.answer_approval``, reached with ``POST
/approvals/{id}``), which then resumes the parked run; with no server serving the agent, the CLI
records it directly (``answer_directly``) and the run resumes when a host next activates the
agent. An answer commutes with the agent's other facts, so a conflicting append is re-recorded
on top of the stream as it is then.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from events import Ledger, UnknownAgent
from events.agent import Agent
from events.agent_state import Approval, ApprovalClosed, UnknownApproval
from events.streams import now
from owlclaw.access.authorize import BOOTSTRAP, Action, Principal, authorize
from owlclaw.messages import ApprovalAnswer, Decision
from owlclaw.tools.errors import ToolError
from owlclaw.tools.tool import Tool

MAX_SPAWN_DEPTH = 16
"""Parents followed up a spawn tree at most (spawn_agent's ``max_depth`` is at most 5)."""


class NotApprover(ApprovalClosed):
    """The principal answering lacks ``approver`` on the agent, or answers as someone else
    (nothing recorded)."""


class ToolArgumentsInvalid(ValueError):
    """An approver's edited arguments do not fit the tool's schema (nothing recorded)."""


def check_approver(principal: Principal, agent_id: str, decision: Decision) -> None:
    """NotApprover unless ``principal`` holds ``approver`` on the agent and answers as itself
    (the server token's caller may name who answers)."""
    refusal = authorize(principal, Action.ANSWER_APPROVAL, agent_id)
    if refusal is not None:
        raise NotApprover(str(refusal))
    if principal.name not in (BOOTSTRAP, decision.by):
        raise NotApprover(f"{principal.name} may answer as itself only, not as {decision.by!r}")


def checked_edit(agent: Agent, decision: Decision, tools: Mapping[str, Tool]) -> None:
    """ToolArgumentsInvalid when an approver's edited arguments do not fit the tool."""
    approval = agent.state.approvals.get(decision.approval_id)
    arguments = decision.arguments
    if approval is None or arguments is None:
        return
    tool = tools.get(approval.tool)
    if tool is None:
        raise ToolArgumentsInvalid(f"the agent's app no longer has tool {approval.tool!r}")
    parsed = tool.spec.parse(arguments)
    if isinstance(parsed, ToolError):
        raise ToolArgumentsInvalid(f"edited arguments of {approval.tool}: {parsed.error}")


def overdue(ledger: Ledger, agent_ids: list[str]) -> list[str]:
    """The agents with a pending approval past its expiry, or an awaited reply past its
    deadline."""
    at = now()
    return [agent_id for agent_id in agent_ids if _overdue(ledger.load_agent(agent_id), at)]


def _overdue(agent: Agent, at: datetime) -> bool:
    if any(a.expires_at <= at for _, a in agent.pending_approvals()):
        return True
    replies = agent.state.replies.values()
    return any(not r.answered and r.reply_by is not None and r.reply_by <= at for r in replies)


def agent_of(ledger: Ledger, approval_id: str, agent_ids: list[str]) -> str:
    """The agent that asked for ``approval_id``; UnknownApproval if none did."""
    for agent_id in agent_ids:
        if approval_id in ledger.load_agent(agent_id).state.approvals:
            return agent_id
    raise UnknownApproval(f"no approval {approval_id!r}")


def complete_approval_id(ledger: Ledger, given: str, agent_ids: list[str]) -> str:
    """The approval id that ``given`` is, or is the unique prefix of (as git takes a commit's
    prefix): what ``owlclaw approvals`` prints is short enough for 80 columns; UnknownApproval
    when it is the prefix of none, or of several (naming them)."""
    known = [a for agent_id in agent_ids for a in ledger.load_agent(agent_id).state.approvals]
    if given in known:
        return given
    matches = sorted(a for a in known if a.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UnknownApproval(f"approval {given!r} is ambiguous: {', '.join(matches)}")
    raise UnknownApproval(f"no approval {given!r}")


def answer_directly(
    ledger: Ledger, agent_id: str, decision: Decision, tools: Mapping[str, Tool] | None = None
) -> ApprovalAnswer:
    """Record an answer from outside the agent's writer (no server serves it)."""
    agent = ledger.load_agent(agent_id)
    if tools is not None:
        checked_edit(agent, decision, tools)
    approval = record_decision(agent, decision, spawn_kin(ledger, agent_id, decision.by))
    agent, positions = ledger.append_rebasing(agent)
    return ApprovalAnswer.of(agent, decision.approval_id, approval.run_id, positions[-1])


def record_decision(agent: Agent, d: Decision, kin: Collection[str] = ()) -> Approval:
    """Record the answer on the agent (nothing when refused); ``kin``: ``spawn_kin``'s."""
    return agent.answer_approval(
        d.approval_id,
        d.approve,
        d.by,
        d.note,
        d.arguments,
        digest=d.digest,
        related=kin,
        principal=d.principal,
        answer=d.answer,
    )


def spawn_kin(ledger: Ledger, agent_id: str, by: str) -> list[str]:
    """``[by]`` when ``by`` names an agent of ``agent_id``'s spawn tree (one with the same
    top-level agent: its parents, its sub-agents and theirs, their siblings), else none: the
    agents its answer is refused as, beyond those the agent's own stream names."""
    try:
        theirs = spawn_root(ledger, by)
    except UnknownAgent:
        return []
    return [by] if theirs == spawn_root(ledger, agent_id) else []


def spawn_root(ledger: Ledger, agent_id: str) -> str:
    """The top-level agent that spawned ``agent_id`` (through its sub-agents), or itself."""
    seen = [agent_id]
    while len(seen) <= MAX_SPAWN_DEPTH:
        parent = ledger.load_agent(seen[-1]).state.parent_agent_id
        if not parent or parent in seen:
            break
        seen.append(parent)
    return seen[-1]
