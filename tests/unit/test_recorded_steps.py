"""One source of recorded steps: a resumed run goes through its own steps without recording
them again, then asks the model; an audit replay's run records each step it is served and may
not ask past the recording."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.runtime.steps import RecordedSteps, ReplayExhausted

AT = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
CALL = {"id": "c1", "type": "function", "function": {"name": "quote", "arguments": "{}"}}
CALLS = {"role": "assistant", "content": None, "tool_calls": [CALL]}
ANSWER = {"role": "assistant", "content": "ok"}


def recording(run_id: uuid.UUID) -> RecordedRun:
    steps: list[tuple[type[ev.LedgerEvent], dict[str, Any]]] = [
        (ev.RunStarted, {"agent_id": "a", "run_no": 1, "trigger": "webhook"}),
        (ev.LLMResponded, {"model": "m", "message": CALLS}),
        (ev.ToolCallRequested, {"call_id": "c1", "tool": "quote", "arguments": {}}),
        (ev.ToolCallSucceeded, {"call_id": "c1", "tool": "quote", "result": {"price": 3}}),
        (ev.LLMResponded, {"model": "m", "message": ANSWER}),
    ]
    events = [
        kind(originator_id=run_id, originator_version=n, timestamp=AT, **fields)
        for n, (kind, fields) in enumerate(steps, 1)
    ]
    return RecordedRun(run_id, events)


def runs(count: int) -> list[Run]:
    agent = Ledger.in_memory().register_agent("a")
    return [Run.start("a", agent.queue_run("webhook")) for _ in range(count)]


def test_a_resumed_run_is_served_its_own_steps_unrecorded_then_asks_the_model() -> None:
    [run] = runs(1)
    steps = RecordedSteps(recording(run.id))
    before = len(run.pending_events)
    assert steps.response(run, {}) == CALLS
    told = steps.told(run, "c1")
    assert told is not None and told.event is ev.ToolCallSucceeded and '"price"' in told.told
    assert steps.response(run, {}) == ANSWER
    assert steps.response(run, {}) is None  # past the recording: the model is asked
    assert len(run.pending_events) == before  # nothing recorded again
    assert steps.unknown_tools(run, []) == []


def test_a_replayed_run_records_each_served_step_and_cannot_ask_past_the_record() -> None:
    recorded_run, replay = runs(2)
    steps = RecordedSteps(recording(recorded_run.id))
    assert steps.response(replay, {"model_path": ["replay"]}) == CALLS
    assert steps.told(replay, "c1") is None  # its tools go through the pipeline again
    assert steps.response(replay, {}) == ANSWER
    served = [e for e in replay.pending_events if isinstance(e, ev.LLMResponded)]
    assert [e.message for e in served] == [CALLS, ANSWER]
    assert served[0].inputs == {"model_path": ["replay"]}
    with pytest.raises(ReplayExhausted, match="recorded 2 model responses"):
        steps.response(replay, {})


def test_a_fresh_run_has_no_recorded_steps() -> None:
    [run] = runs(1)
    steps = RecordedSteps()
    assert steps.response(run, {}) is None and steps.told(run, "c1") is None
    assert not steps.own(run)
