"""Memory provenance on the in-memory ledger: each memory traced to its run, the step whose
``remember`` call recorded it and that call (``projections.provenance``); ``owlclaw why``'s walk
back to the model response with the run's chain verified (``owlclaw.audit.why``); the short
reference MEMORY.md, the recall table and the recall tool show. The memory view's columns and
the command end to end: tests/integration/test_memory_provenance.py."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.audit.why import walk
from owlclaw.cli.tables import recall_table
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections.memory_files import render_entry
from projections.provenance import Provenance, remembered_steps
from projections.recall import MemoryStore, RecallResult
from projections.relevance import Memory
from tests.scripted import call, decide, play, run_events

WHEN = datetime(2026, 11, 1, tzinfo=UTC)


def remembered(events: list[ev.LedgerEvent]) -> list[ev.MemoryRemembered]:
    return [e for e in events if isinstance(e, ev.MemoryRemembered)]


def recorded_run(ledger: Ledger, agent: str = "keeper") -> tuple[list[ev.LedgerEvent], list[str]]:
    """A run that logs a decision (step 1), then remembers two things in one response (step 2);
    its events and the two remember calls' ids."""
    runtime = AgentRuntime(ledger, agent, models=["x"])
    steps = [
        decide(1),
        {"tool_calls": [call("remember", content="lesson A"), call("remember", content="B")]},
        {"content": "done"},
    ]
    try:
        events = run_events(ledger, play(runtime, steps))
    finally:
        runtime.close()
    calls = [e.call_id for e in events if isinstance(e, ev.ToolCallRequested)]
    return events, calls[1:]


def test_each_memory_is_traced_to_its_step_and_its_own_remember_call(ledger: Ledger) -> None:
    events, calls = recorded_run(ledger)
    memories = remembered(events)
    steps = remembered_steps(events, [(m.originator_version, m.memory_id) for m in memories])
    traced = [steps[m.memory_id] for m in memories]
    assert [(s.run_no, s.step, s.call_id) for s in traced] == [(1, 2, calls[0]), (1, 2, calls[1])]
    assert traced[0].reference() == "run 1, step 2"


def test_a_memory_recorded_by_hand_has_its_run_but_no_step_or_call(ledger: Ledger) -> None:
    agent = ledger.register_agent("hand")
    run = Run.start("hand", agent.queue_run("webhook"))
    memory_id = uuid.uuid4()
    run.record(ev.MemoryRemembered, agent_id="hand", memory_id=memory_id, content="x")
    ledger.append(agent, run)
    step = remembered_steps(ledger.stream(run.id), [(2, memory_id)])[memory_id]
    assert (step.run_no, step.step, step.call_id, step.reference()) == (1, 0, "", "run 1")
    assert (
        remembered_steps([], [(1, memory_id)])[memory_id].reference() == ""
    )  # nothing known: no reference


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6))
def test_every_memory_of_any_run_is_traced_to_the_response_that_remembered_it(
    per_step: list[int],
) -> None:
    """A run whose k-th response makes ``per_step[k]`` remember calls, committed as the runtime
    commits them (requests first, then each memory with its call's result): each memory is
    traced to its own response and call, whatever the others."""
    run_id = uuid.uuid4()
    events: list[ev.LedgerEvent] = []
    expected: dict[UUID, tuple[int, str]] = {}

    def add(kind: type[ev.LedgerEvent], **fields: Any) -> None:
        events.append(
            kind(originator_id=run_id, originator_version=len(events) + 1, timestamp=WHEN, **fields)
        )

    add(ev.RunStarted, agent_id="a", run_no=7, trigger="webhook")
    for step, count in enumerate(per_step, start=1):
        add(ev.LLMResponded, model="x", message={"role": "assistant"})
        calls = [f"call_{step}_{i}" for i in range(count)]
        for call_id in calls:
            add(ev.ToolCallRequested, call_id=call_id, tool="remember", arguments={})
        for call_id in calls:
            memory_id = uuid.uuid4()
            expected[memory_id] = (step, call_id)
            add(ev.MemoryRemembered, agent_id="a", memory_id=memory_id, content=call_id)
            result = {"memory_id": str(memory_id), "timestamp": WHEN.isoformat()}
            add(ev.ToolCallSucceeded, call_id=call_id, tool="remember", result=result)
    memories = remembered(events)
    steps = remembered_steps(events, [(m.originator_version, m.memory_id) for m in memories])
    assert {m: (s.run_no, s.step, s.call_id) for m, s in steps.items()} == {
        m: (7, *where) for m, where in expected.items()
    }


def recalled(ledger: Ledger, event: ev.MemoryRemembered, event_hash: str) -> Memory:
    """The memory as recall returns it, its source as the view recorded it."""
    source = Provenance(event.originator_id, 1, 2, "", event.originator_version, 9, event_hash)
    return Memory(event.memory_id, event.content, [], WHEN, 0.9, 0.8, 0.9, source)


def test_why_walks_to_the_model_response_with_the_chain_verified(ledger: Ledger) -> None:
    events, calls = recorded_run(ledger)
    first = remembered(events)[0]
    key = (first.originator_id, first.originator_version)
    stored = ledger.chains.event_hashes([key])[key].hex()
    trail = walk(ledger, recalled(ledger, first, stored))
    assert (trail.run_no, trail.step, trail.call_id) == (1, 2, calls[0])
    assert (trail.version, trail.event_hash) == (first.originator_version, stored)
    assert trail.response is not None
    response = events[trail.response.version - 1]
    assert isinstance(response, ev.LLMResponded) and response.originator_version < trail.version
    assert trail.response.excerpt == 'remember({"content": "lesson A"})'  # its call only
    assert trail.chain.verified and trail.chain.problems == []
    assert trail.chain.checked == first.originator_version


def test_why_reports_an_event_rewritten_since_the_view_projected_it(ledger: Ledger) -> None:
    """The chain recomputes, but the hash the view kept when it projected the memory is not
    the one stored now: the event was rewritten with its hashes recomputed in between."""
    events, _ = recorded_run(ledger)
    first = remembered(events)[0]
    trail = walk(ledger, recalled(ledger, first, "00" * 32))
    assert not trail.chain.verified
    assert "not the one the memory was projected from" in trail.chain.problems[0]


def test_memory_md_cites_the_run_and_step_in_the_entry_heading() -> None:
    memory_id = UUID(int=5)
    cited = render_entry(memory_id, WHEN, ["t"], "text", "run 12, step 3")
    assert cited.splitlines()[0] == f"## 2026-11-01T00:00:00.000000Z · {memory_id} (run 12, step 3)"
    plain = render_entry(memory_id, WHEN, ["t"], "text")
    assert plain.splitlines()[0] == f"## 2026-11-01T00:00:00.000000Z · {memory_id}"


def test_the_recall_table_shows_where_each_memory_came_from() -> None:
    source = Provenance(uuid.uuid4(), 12, 3, "call_1", 9, 40, "ab" * 32)
    memory = Memory(UUID(int=7), "lesson", [], WHEN, 0.8, 0.7, 0.9, source)
    console = Console(file=io.StringIO(), width=80)
    console.print(recall_table("recalls", [memory]))
    assert "run 12, step 3" in console.file.getvalue()  # type: ignore[attr-defined]


class FixedRecall(MemoryStore):
    def __init__(self, memories: list[Memory]):
        self.memories = memories

    def recall(  # type: ignore[override]
        self, agent_id: str, query: str, limit: int = 5, **kwargs: Any
    ) -> RecallResult:
        return RecallResult(self.memories[:limit])


def test_the_recall_tool_tells_the_model_the_run_of_each_memory(ledger: Ledger) -> None:
    known = Provenance(uuid.uuid4(), 12, 3, "call_1", 9, 40, "ab" * 32)
    unknown = Provenance(uuid.uuid4(), 0, 0, "", 0, 41, "")
    memories = [
        Memory(uuid.uuid4(), "traced", [], WHEN, 0.9, 0.8, 0.9, known),
        Memory(uuid.uuid4(), "projected before provenance", [], WHEN, 0.9, 0.7, 0.9, unknown),
    ]
    runtime = AgentRuntime(ledger, "asker", models=["x"], memory=FixedRecall(memories))
    try:
        result = play(runtime, [{"tool_calls": [call("recall", query="q")]}, {"content": "ok"}])
    finally:
        runtime.close()
    [told] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert [m.get("run") for m in told.result["memories"]] == [12, None]
    assert set(told.result["memories"][0]) == {
        "memory_id",
        "content",
        "tags",
        "timestamp",
        "relevance",
        "run",
    }
