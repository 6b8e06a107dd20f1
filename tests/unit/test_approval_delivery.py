"""Approvals through the agent's writer on the in-process host: a refused answer records nothing
and runs nothing; a grant runs its call once however often the answer or the resume is
delivered; two approvers are two different principals. The order tool appends a line to a
file per execution, so the file counts the executions."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.agent_state import ApprovalClosed, DigestMismatch, SameApprover, SelfApproval
from owlclaw.messages import AnswerApproval, Decision, Result, Submit
from owlclaw.reports.approvals import pending
from owlclaw.runtime.approvals import answer_directly
from owlclaw.runtime.models import Answer
from tests.approvals import config, digest_of, park, resumed, trader

ORDER_CALL = {
    "id": "call-1",
    "type": "function",
    "function": {"name": "place_order", "arguments": '{"symbol": "ACME", "amount": 5000}'},
}


class RepeatsItsCallId:
    """A model that sends the approved call again under the same id, then answers."""

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        asked = sum(1 for m in messages if m.get("role") == "assistant")
        message: dict[str, Any] = {"role": "assistant", "content": "done"}
        if asked < 2:
            message = {"role": "assistant", "content": None, "tool_calls": [ORDER_CALL]}
        return Answer(message, {"total_tokens": 1}, 0.0, "stop")


def agent_events(ledger: Ledger, agent_id: str) -> list[str]:
    return [type(e).__name__ for e in ledger.stream(ledger.load_agent(agent_id).id)]


def run_events(ledger: Ledger, run_id: str) -> list[str]:
    return [type(e).__name__ for e in ledger.stream(uuid.UUID(run_id))]


async def answer(ledger: Ledger, agent_id: str, decision: Decision) -> tuple[str, str]:
    """The answer through a host's writer, and the run's status once it settled."""
    host = AgentHost(ledger, config(agent_id))
    try:
        answered = await host.ask(AnswerApproval(agent_id=agent_id, decision=decision))
        if answered.status == "pending":  # not resumed: the run stays as it parked
            return answered.status, ledger.load_run(uuid.UUID(answered.run_id)).state.status
        result = await host.ask(Result(agent_id=agent_id, run_id=answered.run_id))
        return answered.status, result.status
    finally:
        await host.close()


def test_an_answer_for_other_arguments_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    ledger = Ledger.in_memory()
    app, orders = trader(tmp_path, "mismatch", 'ask = ["place_order"]')
    ledger.register_agent("mismatch", app)
    run_id, approval_id = asyncio.run(park(ledger, "mismatch"))
    before = agent_events(ledger, "mismatch")
    stale = Decision(approval_id, True, "alice", digest="0" * 64)
    with pytest.raises(DigestMismatch, match=digest_of(ledger, "mismatch", approval_id)):
        asyncio.run(answer(ledger, "mismatch", stale))
    assert agent_events(ledger, "mismatch") == before
    assert run_events(ledger, run_id)[-1] == "RunParked" and not orders.exists()


def test_a_grant_delivered_twice_and_resumed_twice_runs_the_call_once(tmp_path: Path) -> None:
    ledger = Ledger.in_memory()
    app, orders = trader(tmp_path, "once", 'ask = ["place_order"]')
    ledger.register_agent("once", app)
    run_id, approval_id = asyncio.run(park(ledger, "once"))
    yes = Decision(approval_id, True, "alice", digest=digest_of(ledger, "once", approval_id))
    answer_directly(ledger, "once", yes)  # no host serves it: a crash right after the grant
    with pytest.raises(ApprovalClosed, match="already granted"):
        answer_directly(ledger, "once", yes)  # the grant delivered again

    async def two_hosts_resume_it() -> list[str]:
        """Two hosts activate the agent at once, each resuming the answered run: the two
        resume deliveries race."""
        results = await asyncio.gather(
            resumed(ledger, "once", run_id), resumed(ledger, "once", run_id), return_exceptions=True
        )
        return [r.status if not isinstance(r, BaseException) else type(r).__name__ for r in results]

    statuses = asyncio.run(two_hosts_resume_it())
    assert "completed" in statuses
    assert asyncio.run(resumed(ledger, "once", run_id)).status == "completed"  # a third
    assert orders.read_text() == "ACME 5000.0\n"  # executed once
    kinds = run_events(ledger, run_id)
    assert kinds.count("ToolCallRequested") == 1
    # One outcome: the winner's success, or, when the loser's conflict interrupted the winner
    # after the call ran but before its outcome was committed, the next resume's honest
    # ToolOutcomeUnknown (the call is never made again).
    outcomes = [k for k in kinds if k in ("ToolCallSucceeded", "ToolOutcomeUnknown")]
    assert len(outcomes) == 1, kinds
    assert agent_events(ledger, "once").count("ApprovalGranted") == 1


def test_two_approvers_one_parks_the_same_twice_is_refused_the_second_resumes(
    tmp_path: Path,
) -> None:
    ledger = Ledger.in_memory()
    governance = 'ask = ["place_order"]\napprovals_required = { place_order = 2 }'
    app, orders = trader(tmp_path, "dual", governance)
    ledger.register_agent("dual", app)
    _, approval_id = asyncio.run(park(ledger, "dual"))
    digest = digest_of(ledger, "dual", approval_id)
    alice = Decision(approval_id, True, "alice", digest=digest)
    assert asyncio.run(answer(ledger, "dual", alice)) == ("pending", "parked")
    assert not orders.exists()
    with pytest.raises(SameApprover):
        asyncio.run(answer(ledger, "dual", alice))
    bob = Decision(approval_id, True, "bob", digest=digest)
    assert asyncio.run(answer(ledger, "dual", bob)) == ("granted", "completed")
    assert orders.read_text() == "ACME 5000.0\n"
    grants = [
        e for e in ledger.stream(ledger.load_agent("dual").id) if isinstance(e, ev.ApprovalGranted)
    ]
    assert [(g.by, g.awaiting, g.digest) for g in grants] == [
        ("alice", 1, digest),
        ("bob", 0, digest),
    ]


def test_a_denial_after_one_of_two_grants_denies(tmp_path: Path) -> None:
    ledger = Ledger.in_memory()
    governance = 'ask = ["place_order"]\napprovals_required = { place_order = 2 }'
    app, orders = trader(tmp_path, "vetoed", governance)
    ledger.register_agent("vetoed", app)
    run_id, approval_id = asyncio.run(park(ledger, "vetoed"))
    digest = digest_of(ledger, "vetoed", approval_id)
    asyncio.run(answer(ledger, "vetoed", Decision(approval_id, True, "alice", digest=digest)))
    no = Decision(approval_id, False, "bob", "too big", digest=digest)
    assert asyncio.run(answer(ledger, "vetoed", no)) == ("denied", "completed")
    assert not orders.exists()
    assert "ToolCallDenied" in run_events(ledger, run_id)


def test_the_agent_and_its_sub_agents_may_not_answer_its_approval(tmp_path: Path) -> None:
    ledger = Ledger.in_memory()
    app, orders = trader(tmp_path, "desk", 'ask = ["place_order"]')
    ledger.register_agent("desk", app)
    ledger.register_agent("desk.sub-1", app, parent_agent_id="desk", depth=1)
    run_id, approval_id = asyncio.run(park(ledger, "desk"))
    digest = digest_of(ledger, "desk", approval_id)
    before = agent_events(ledger, "desk")
    for by in ("desk", "desk.sub-1"):
        with pytest.raises(SelfApproval, match="spawn tree"):
            asyncio.run(answer(ledger, "desk", Decision(approval_id, True, by, digest=digest)))
    assert agent_events(ledger, "desk") == before and not orders.exists()
    assert run_events(ledger, run_id)[-1] == "RunParked"


def test_a_model_repeating_an_approved_call_id_gets_no_second_execution(tmp_path: Path) -> None:
    ledger = Ledger.in_memory()
    app, orders = trader(tmp_path, "repeats", 'ask = ["place_order"]')
    ledger.register_agent("repeats", app)

    async def scenario() -> str:
        host = AgentHost(ledger, config("repeats"), llm=RepeatsItsCallId())
        try:
            run_id = await host.ask(Submit(agent_id="repeats", trigger="webhook", focus="buy"))
            assert (await host.ask(Result(agent_id="repeats", run_id=run_id))).status == "parked"
            [approval] = pending(ledger, ["repeats"])
            yes = Decision(approval.approval_id, True, "alice", digest=approval.digest)
            await host.ask(AnswerApproval(agent_id="repeats", decision=yes))
            return (await host.ask(Result(agent_id="repeats", run_id=run_id))).status
        finally:
            await host.close()

    assert asyncio.run(scenario()) == "completed"
    assert orders.read_text() == "ACME 5000.0\n"  # the second call with that id did not run
    [run] = [
        e for e in ledger.stream(ledger.load_agent("repeats").id) if isinstance(e, ev.RunQueued)
    ]
    denied = [e for e in ledger.stream(run.run_id) if isinstance(e, ev.ToolCallDenied)]
    assert [d.error_code for d in denied] == ["APPROVAL_USED"]
