"""The Agent's approval rules: an answer names the digest of the arguments it was shown, a
principal grants once, ``approvals_required`` different principals let the call run, any
denial denies, and an agent of the approval's spawn tree never answers it. Every refusal
records nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.agent_state import (
    ApprovalClosed,
    DigestMismatch,
    SameApprover,
    SelfApproval,
)
from events.argument_digest import arguments_digest
from events.codec import MsgspecMapper
from events.run import Run
from owlclaw.access.authorize import Principal, bootstrap
from owlclaw.access.roles import parse_grant
from owlclaw.messages import Decision
from owlclaw.runtime.approvals import NotApprover, answer_directly, check_approver, spawn_kin
from owlclaw.tools.executor import unbound_grant
from owlclaw.tools.governance import Governance

ORDER = {"symbol": "ACME", "amount": 5000}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms())
def test_the_digest_is_the_same_whatever_the_order_of_the_keys(
    arguments: dict[str, Any], rng: Any
) -> None:
    items = list(arguments.items())
    rng.shuffle(items)
    assert arguments_digest(dict(items)) == arguments_digest(arguments)


@given(st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=6))
def test_any_change_of_a_value_is_another_digest(arguments: dict[str, Any]) -> None:
    key = next(iter(arguments))
    changed = {**arguments, key: [arguments[key]]}
    assert arguments_digest(changed) != arguments_digest(arguments)


def asked(ledger: Ledger, agent_id: str = "trader", required: int = 1) -> tuple[Agent, str, str]:
    """An agent with one call waiting for approval; (agent, approval id, digest shown)."""
    agent = ledger.register_agent(agent_id)
    run = Run.start(agent_id, agent.queue_run("webhook", "buy"))
    approval_id = agent.request_approval(
        run.id, "c1", "place_order", ORDER, "ask", [], 3600, approvals_required=required
    )
    ledger.append(agent, run)
    return ledger.load_agent(agent_id), approval_id, arguments_digest(ORDER)


def grant(agent: Agent, approval_id: str, by: str, digest: str, **kwargs: Any) -> str:
    agent.answer_approval(approval_id, True, by, digest=digest, **kwargs)
    return agent.state.approvals[approval_id].status


def test_a_request_records_the_digest_of_its_arguments(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger)
    [request] = [e for e in ledger.stream(agent.id) if isinstance(e, ev.ApprovalRequested)]
    assert request.digest == digest == agent.state.approvals[approval_id].shown()[1]


def test_an_answer_for_another_digest_is_refused_and_records_nothing(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger)
    for wrong in ("", arguments_digest({**ORDER, "amount": 5}), digest.upper()):
        with pytest.raises(DigestMismatch, match=digest):
            agent.answer_approval(approval_id, True, "alice", digest=wrong)
        with pytest.raises(DigestMismatch):
            agent.answer_approval(approval_id, False, "alice", digest=wrong)
    assert agent.pending_events == []
    assert agent.state.approvals[approval_id].status == "pending"
    assert grant(agent, approval_id, "alice", digest) == "granted"


def test_a_grant_executes_its_call_once_and_only_with_the_arguments_shown(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger)
    grant(agent, approval_id, "alice", digest)
    approval = agent.state.approvals[approval_id]
    run = Run.blank(approval.run_id)
    assert unbound_grant(run, "c1", approval, dict(reversed(ORDER.items()))) is None
    other = unbound_grant(run, "c1", approval, {**ORDER, "amount": 9000})
    assert other is not None and other.error_code == "APPROVAL_MISMATCH"
    run.record(ev.ToolCallRequested, call_id="c1", tool="place_order", arguments=ORDER)
    used = unbound_grant(run, "c1", approval, ORDER)
    assert used is not None and used.error_code == "APPROVAL_USED"


def test_an_edit_is_granted_under_its_own_digest(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger)
    edited = {**ORDER, "amount": 100}
    grant(agent, approval_id, "alice", digest, arguments=edited)
    [granted] = [e for e in agent.pending_events if isinstance(e, ev.ApprovalGranted)]
    assert (granted.arguments, granted.digest) == (edited, arguments_digest(edited))
    assert agent.state.approvals[approval_id].shown() == (edited, arguments_digest(edited))


def test_two_approvers_the_first_grant_parks_the_same_one_again_is_refused(
    ledger: Ledger,
) -> None:
    agent, approval_id, digest = asked(ledger, required=2)
    assert grant(agent, approval_id, "alice", digest) == "pending"
    [first] = agent.pending_events
    assert isinstance(first, ev.ApprovalGranted) and (first.by, first.awaiting) == ("alice", 1)
    with pytest.raises(SameApprover, match="2 different approvers"):
        grant(agent, approval_id, "alice", digest)
    assert len(agent.pending_events) == 1
    assert grant(agent, approval_id, "bob", digest) == "granted"
    assert agent.state.approvals[approval_id].granted_by == ["alice", "bob"]
    with pytest.raises(ApprovalClosed, match="already granted"):
        grant(agent, approval_id, "carol", digest)


def test_two_names_through_one_token_are_one_approver(ledger: Ledger) -> None:
    """The server token's caller names who answers; the record names the token too, and two
    grants through it count once whatever names they give."""
    agent, approval_id, digest = asked(ledger, required=2)
    assert grant(agent, approval_id, "alice", digest, principal="server-token") == "pending"
    with pytest.raises(SameApprover):
        grant(agent, approval_id, "bob", digest, principal="server-token")
    assert grant(agent, approval_id, "carol", digest, principal="carol") == "granted"
    grants = [e for e in agent.pending_events if isinstance(e, ev.ApprovalGranted)]
    assert [(g.by, g.principal) for g in grants] == [
        ("alice", "server-token"),
        ("carol", "carol"),
    ]


def test_a_denial_after_one_grant_denies(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger, required=2)
    grant(agent, approval_id, "alice", digest)
    agent.answer_approval(approval_id, False, "bob", "no", digest=digest)
    assert agent.state.approvals[approval_id].status == "denied"


def test_an_edit_needs_the_approvers_again_for_the_new_arguments(ledger: Ledger) -> None:
    agent, approval_id, digest = asked(ledger, required=2)
    grant(agent, approval_id, "alice", digest)
    edited = {**ORDER, "amount": 100}
    assert grant(agent, approval_id, "bob", digest, arguments=edited) == "pending"
    with pytest.raises(DigestMismatch):  # alice read the old arguments
        grant(agent, approval_id, "carol", digest)
    with pytest.raises(SameApprover):
        grant(agent, approval_id, "bob", arguments_digest(edited))
    assert grant(agent, approval_id, "alice", arguments_digest(edited)) == "granted"
    assert agent.state.approvals[approval_id].edited_arguments == edited


def test_the_agent_its_parent_and_its_sub_agents_may_not_answer(ledger: Ledger) -> None:
    ledger.register_agent("desk")
    ledger.register_agent("desk.sub-1", parent_agent_id="desk", depth=1)
    ledger.register_agent("desk.sub-2", parent_agent_id="desk", depth=1)
    ledger.register_agent("desk.sub-1.sub-3", parent_agent_id="desk.sub-1", depth=2)
    ledger.register_agent("elsewhere")
    agent, approval_id, digest = asked(ledger, "desk.sub-1")
    for by in ("desk.sub-1", "desk", "desk.sub-2", "desk.sub-1.sub-3"):
        kin = spawn_kin(ledger, "desk.sub-1", by)
        with pytest.raises(SelfApproval, match="spawn tree"):
            agent.answer_approval(approval_id, True, by, digest=digest, related=kin)
        with pytest.raises(SelfApproval):
            agent.answer_approval(approval_id, False, by, digest=digest, related=kin)
    assert agent.pending_events == []
    assert spawn_kin(ledger, "desk.sub-1", "elsewhere") == []
    assert spawn_kin(ledger, "desk.sub-1", "alice") == []
    assert grant(agent, approval_id, "elsewhere", digest) == "granted"


def test_an_answer_recorded_directly_applies_the_same_rules(ledger: Ledger) -> None:
    ledger.register_agent("desk")
    ledger.register_agent("desk.sub-1", parent_agent_id="desk", depth=1)
    _, approval_id, digest = asked(ledger, "desk.sub-1")
    head = ledger.log.head()
    with pytest.raises(SelfApproval):
        answer_directly(ledger, "desk.sub-1", Decision(approval_id, True, "desk", digest=digest))
    with pytest.raises(DigestMismatch):
        answer_directly(ledger, "desk.sub-1", Decision(approval_id, True, "alice"))
    assert ledger.log.head() == head
    answered = answer_directly(
        ledger, "desk.sub-1", Decision(approval_id, True, "alice", "", None, digest)
    )
    assert answered.status == "granted"


def test_a_request_recorded_before_digests_loads_and_binds_its_arguments() -> None:
    """Version 1 of ApprovalRequested and ApprovalGranted (no digest) still load; such an
    approval is answered for the digest of its arguments as read."""
    mapper = MsgspecMapper()
    header = {"originator_id": str(uuid4()), "originator_version": 2}
    at = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    v1 = {
        **header,
        "timestamp": at,
        "approval_id": "ap-1",
        "agent_id": "trader",
        "run_id": str(uuid4()),
        "call_id": "c1",
        "tool": "place_order",
        "arguments": ORDER,
        "reason": "ask",
        "approvers": [],
        "expires_at": "2099-01-01T00:00:00+00:00",
    }
    stored = StoredEvent(header["originator_id"], 2, "ApprovalRequested", msgspec.json.encode(v1))
    request = mapper.to_domain_event(stored)
    assert isinstance(request, ev.ApprovalRequested)
    assert (request.digest, request.approvals_required) == ("", 1)
    granted_v1 = {**header, "timestamp": at, "approval_id": "ap-1", "by": "alice"}
    granted = mapper.to_domain_event(
        StoredEvent(header["originator_id"], 3, "ApprovalGranted", msgspec.json.encode(granted_v1))
    )
    assert isinstance(granted, ev.ApprovalGranted)
    assert (granted.digest, granted.awaiting) == ("", 0)

    agent = Agent.blank(request.originator_id)
    agent.record(ev.AgentRegistered, agent_id="trader")
    agent._on_ApprovalRequested(request)
    assert agent.state.approvals["ap-1"].shown() == (ORDER, arguments_digest(ORDER))
    agent._on_ApprovalGranted(granted)
    assert agent.state.approvals["ap-1"].status == "granted"


def test_governance_names_how_many_approvers_a_tool_needs() -> None:
    governance = Governance.from_app_config(
        {"governance": {"approvals_required": {"place_*": 2, "place_order": 3}}}
    )
    assert governance.approvals_needed("place_order") == 3
    assert governance.approvals_needed("place_limit") == 2
    assert governance.approvals_needed("cancel_order") == 1
    with pytest.raises(ValueError, match="approvers names only 1"):
        Governance.from_app_config(
            {"governance": {"approvers": ["alice"], "approvals_required": {"place_order": 2}}}
        )
    with pytest.raises(ValueError, match="approvals_required"):
        Governance.from_app_config({"governance": {"approvals_required": {"place_order": 9}}})


def test_an_answer_needs_approver_on_the_agent_and_is_given_as_oneself() -> None:
    alice = Principal("alice", (parse_grant("approver:acme.*"), parse_grant("admin")))
    check_approver(alice, "acme.desk", Decision("ap-1", True, "alice"))
    with pytest.raises(NotApprover, match=r"needs role approver on agent 'globex\.desk'"):
        check_approver(alice, "globex.desk", Decision("ap-1", True, "alice"))
    with pytest.raises(NotApprover, match="as itself only"):
        check_approver(alice, "acme.desk", Decision("ap-1", True, "bob"))
    check_approver(bootstrap(), "globex.desk", Decision("ap-1", True, "bob"))
