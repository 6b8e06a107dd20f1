"""A tool step's commit may complete behind the run when the tool's only effect is ledger
events: what that must never change, on the real ledger. A tool acting outside the ledger still
runs after its request is durable; recall still finds every memory recorded before its call;
a commit that fails behind the run stops the run at its last durable event, as a waited-for
commit would."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from events import Ledger, LedgerUnavailable
from events import catalog as ev
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.loop import AgentRuntime
from owlclaw.tools.tool import ToolContext
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from tests.scripted import call, decide, run_events, run_script

pytestmark = pytest.mark.integration
LESSON = "Rebounds after a sharp drop are reliable within two hours"


def test_a_tool_acting_outside_the_ledger_runs_after_its_request_is_durable(
    ledger: Ledger,
) -> None:
    registry = Registry()

    @registry.capability("Place an order.")
    def place_order(symbol: str, ctx: ToolContext) -> dict[str, Any]:
        stored = ledger.stream(ctx.run_id)
        return {
            "request_stored": any(
                isinstance(e, ev.ToolCallRequested) and e.call_id == ctx.call_id for e in stored
            )
        }

    runtime = AgentRuntime(
        ledger, f"orders-{uuid.uuid4().hex[:6]}", models=["x"], registry=registry
    )
    steps = [
        step
        for i in range(3)
        for step in (decide(i), {"tool_calls": [call("place_order", symbol=f"ACME{i}")]})
    ]
    result = run_script(runtime, "write-ahead", [*steps, {"content": "done"}])

    events = run_events(ledger, result)
    orders = [e for e in events if isinstance(e, ev.ToolCallSucceeded) and e.tool == "place_order"]
    assert result.status == "completed"
    assert [o.result for o in orders] == [{"request_stored": True}] * 3
    assert len([e for e in events if isinstance(e, ev.DecisionLogged)]) == 3


@dataclass
class SlowToIndex:
    """The local model, taking 0.3 s more to embed the lesson: the view absorbs the memory
    well after the run that remembered it ended."""

    embedder: Embedder

    @property
    def model(self) -> str:
        return self.embedder.model

    @property
    def dimensions(self) -> int:
        return self.embedder.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if LESSON in texts:
            time.sleep(0.3)
        return self.embedder.embed(texts)


def test_recall_while_its_request_commits_behind_finds_the_last_runs_memory(
    ledger: Ledger, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    append_events = ledger.append_events

    def slow_recall_request(events: Any, aggregates: Any = ()) -> list[int]:
        """Recall's request (the run's first commit) is still in flight when recall runs."""
        if any(isinstance(e, ev.ToolCallRequested) and e.tool == "recall" for e in events):
            time.sleep(0.5)
        return append_events(events, aggregates)

    monkeypatch.setattr(ledger, "append_events", slow_recall_request)
    view = MemoryView(ledger.datastore, embedder=SlowToIndex(local_embedder))
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        runtime = AgentRuntime(
            ledger, f"recall-{uuid.uuid4().hex[:6]}", models=["x"], memory=MemoryStore(view)
        )
        run_script(
            runtime,
            "remember",
            [{"tool_calls": [call("remember", content=LESSON)]}, {"content": "noted"}],
        )
        result = run_script(
            runtime,
            "recall",
            [{"tool_calls": [call("recall", query="sharp drop rebound")]}, {"content": "done"}],
        )
    finally:
        runner.stop()
    [recalled] = [
        e
        for e in run_events(ledger, result)
        if isinstance(e, ev.ToolCallSucceeded) and e.tool == "recall"
    ]
    assert [m["content"] for m in recalled.result["memories"]] == [LESSON]


def test_a_commit_failing_behind_the_run_stops_it_at_its_last_durable_event(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = AgentRuntime(ledger, f"lost-{uuid.uuid4().hex[:6]}", models=["x"])
    append_events = ledger.append_events

    def failing_step_2(events: Any, aggregates: Any = ()) -> list[int]:
        if any(isinstance(e, ev.ToolCallRequested) and e.call_id.endswith("_2_0") for e in events):
            raise LedgerUnavailable("the database went away", committed=False)
        return append_events(events, aggregates)

    monkeypatch.setattr(ledger, "append_events", failing_step_2)
    with pytest.raises(LedgerUnavailable, match="the database went away"):
        run_script(runtime, "lost", [decide(i) for i in range(6)] + [{"content": "done"}])
    monkeypatch.undo()

    [run_id] = [
        e.run_id
        for e in ledger.stream(ledger.load_agent(runtime.agent_id).id)
        if isinstance(e, ev.RunQueued)
    ]
    stored = ledger.stream(run_id)
    assert [e.originator_version for e in stored] == list(range(1, len(stored) + 1))
    assert not any(isinstance(e, ev.RunCompleted) for e in stored)
    requests = [e.call_id for e in stored if isinstance(e, ev.ToolCallRequested)]
    assert [c[-3:] for c in requests] == ["0_0", "1_0"]
    assert isinstance(stored[-1], ev.RunFailed)
    assert "a commit failed (the database went away)" in stored[-1].error
