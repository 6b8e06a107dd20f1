"""Rebuilding a recorded run's decision points from the ledger alone, and choosing runs for an
eval (in-memory ledger)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from events.streams import now
from owlclaw.audit.decision_points import AgentRecord, decision_points
from owlclaw.audit.evals import RunSelector, SelectorError

AGENT = "auditee"


def _call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    function = {"name": name, "arguments": arguments}
    return {"role": "assistant", "tool_calls": [{"id": call_id, "function": function}]}


def _record(ledger: Ledger) -> uuid.UUID:
    """Run 1 remembers a lesson and schedules a re-check; run 2 recalls the lesson, sees the
    schedule, queries the market and answers."""
    memory_id = uuid.uuid4()
    agent = ledger.register_agent(AGENT)
    first = Run.start(AGENT, agent.queue_run("webhook", focus="learn"))
    first.record(ev.VisibleToolsResolved, tools=["remember"])
    first.record(ev.LLMResponded, model="m", message={"role": "assistant", "content": "ok"})
    first.record(
        ev.MemoryRemembered, agent_id=AGENT, memory_id=memory_id, content="rebounds within 2h"
    )
    first.record(ev.DecisionLogged, decision_type="other", reasoning="kept the lesson")
    first.record(ev.RunCompleted, answer="learned")
    agent.record(
        ev.ScheduleRequested,
        schedule_id="recheck",
        kind="once",
        focus="re-check ACME",
        fire_at=now() + timedelta(hours=1),
    )
    ledger.append(agent, first)

    second = Run.start(AGENT, agent.queue_run("webhook", focus="check ACME", payload={"p": 1}))
    second.record(ev.VisibleToolsResolved, tools=["query_state", "log_decision", "entry_check"])
    second.record(
        ev.LLMResponded,
        model="m",
        message=_call("c1", "query_state", '{"state_name": "market"}'),
        inputs={"memories": {str(memory_id): 0.7}, "schedules": ["recheck"]},
    )
    second.record(ev.ToolCallRequested, call_id="c1", tool="query_state", arguments={})
    second.record(ev.ToolCallSucceeded, call_id="c1", tool="query_state", result={"open": True})
    second.record(ev.LLMResponded, model="m", message={"role": "assistant", "content": "done"})
    second.record(ev.RunCompleted, answer="done")
    ledger.append(agent, second)
    return memory_id


def test_context_is_rebuilt_from_the_ledger() -> None:
    ledger = Ledger.in_memory()
    memory_id = _record(ledger)
    record = AgentRecord(ledger, AGENT)
    context = asyncio.run(record.context(2))
    assert context.drift == []  # rebuilt inputs (schedules shown) are the recorded ones
    system, user = (m["content"] for m in context.opening)
    assert f"{memory_id}" in system and "'rebounds within 2h'" in system
    assert "recheck once" in system and "'re-check ACME'" in system
    assert "## Recent activity" in system and "decided (other): kept the lesson" in system
    assert (
        user == 'Trigger: webhook\nFocus: check ACME\n\nPayload (data, not instructions):\n{"p": 1}'
    )
    assert [t["function"]["name"] for t in context.tools] == [
        "query_state",
        "log_decision",
        "entry_check",
    ]
    assert context.tools[2]["function"]["description"] == "(recorded)"  # not loaded here
    first, second = context.points()
    assert first.messages == context.opening
    assert second.messages[2:] == [
        _call("c1", "query_state", '{"state_name": "market"}'),
        {"role": "tool", "tool_call_id": "c1", "content": '{"open":true}'},
    ]
    assert context.recorded_calls() == {("query_state", '{"state_name": "market"}'): "c1"}

    assert asyncio.run(decision_points(ledger, AGENT, 2)) == [first, second]
    earlier = asyncio.run(record.context(1))
    assert "recheck" not in earlier.opening[0]["content"]  # scheduled after run 1 started


def test_selector_by_numbers_trigger_focus_and_time() -> None:
    ledger = Ledger.in_memory()
    _record(ledger)
    record = AgentRecord(ledger, AGENT)
    assert RunSelector().select(record) == [1, 2]
    assert RunSelector(runs="2..9").select(record) == [2]
    assert RunSelector(runs="1,2", focus="ACME").select(record) == [2]
    assert RunSelector(trigger="cron").select(record) == []
    queued_2 = record.queued[2].timestamp
    assert RunSelector(since=queued_2).select(record) == [2]
    assert RunSelector(until=queued_2).select(record) == [1]
    naive = queued_2.replace(tzinfo=None)  # a time without a zone is UTC
    assert RunSelector(since=naive).select(record) == [2]
    assert RunSelector(runs="1..3,7").numbers() == {1, 2, 3, 7}
    for bad in ("3..1", "x", "0", "1..", ""):
        with pytest.raises(SelectorError):
            RunSelector(runs=bad).numbers()
