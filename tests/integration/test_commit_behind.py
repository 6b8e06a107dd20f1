"""A tool step's commit may complete behind the run when the tool's only effect is ledger
events: what that must never change, on the real ledger. A tool acting outside the ledger still
runs after its request is durable; recall still finds every memory recorded before its call;
a commit that fails behind the run stops the run at its last durable event, as a waited-for
commit would."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from events import Ledger, LedgerUnavailable
from events import catalog as ev
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from owlclaw.tools.capabilities import Registry
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
    view = MemoryView(ledger, embedder=SlowToIndex(local_embedder))
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        recall = MemoryStore(view, wait_s=60)  # up to 60 s for the view, not the default 1 s
        runtime = AgentRuntime(
            ledger, f"recall-{uuid.uuid4().hex[:6]}", models=["x"], memory=recall
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


@pytest.mark.parametrize(
    ("steps", "lost", "durable"),
    [
        pytest.param(6, "_2_0", ["0_0", "1_0"], id="found-by-the-next-step"),
        pytest.param(2, "_1_0", ["0_0"], id="found-by-the-runs-last-commit"),
    ],
)
def test_a_commit_failing_behind_the_run_stops_it_at_its_last_durable_event(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, steps: int, lost: str, durable: list[str]
) -> None:
    runtime = AgentRuntime(ledger, f"lost-{uuid.uuid4().hex[:6]}", models=["x"])
    failing_when(
        ledger,
        monkeypatch,
        lambda e: isinstance(e, ev.ToolCallRequested) and e.call_id.endswith(lost),
    )
    with pytest.raises(LedgerUnavailable, match="the database went away"):
        run_script(runtime, "lost", [decide(i) for i in range(steps)] + [{"content": "done"}])
    monkeypatch.undo()

    [run_id] = ledger.list_runs(runtime.agent_id)
    stored = ledger.stream(run_id)
    assert [e.originator_version for e in stored] == list(range(1, len(stored) + 1))
    requests = [e.call_id for e in stored if isinstance(e, ev.ToolCallRequested)]
    assert [c[-3:] for c in requests] == durable
    assert isinstance(stored[-1], ev.RunFailed)
    assert "a commit failed (the database went away)" in stored[-1].error
    assert ledger.load_run(run_id).state.ended


def failing_when(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, lost: Callable[[ev.LedgerEvent], bool]
) -> None:
    """Appends carrying an event that ``lost`` picks fail as if the database went away."""
    append_events = ledger.append_events

    def append(events: Any, aggregates: Any = ()) -> list[int]:
        if any(lost(e) for e in events):
            raise LedgerUnavailable("the database went away", committed=False)
        return append_events(events, aggregates)

    monkeypatch.setattr(ledger, "append_events", append)


def test_what_a_tool_recorded_on_the_agent_after_a_lost_commit_is_not_committed(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = AgentRuntime(ledger, f"sched-{uuid.uuid4().hex[:6]}", models=["x"])
    failing_when(
        ledger,
        monkeypatch,
        lambda e: isinstance(e, ev.ToolCallRequested) and e.tool == "schedule_cron",
    )
    steps = [
        decide(0),
        {"tool_calls": [call("schedule_cron", cron_expression="0 9 * * 1", focus="weekly review")]},
        decide(2),
        {"content": "done"},
    ]
    with pytest.raises(LedgerUnavailable):
        run_script(runtime, "lost-schedule", steps)
    monkeypatch.undo()

    agent = ledger.stream(ledger.load_agent(runtime.agent_id).id)
    assert not any(isinstance(e, ev.ScheduleRequested) for e in agent)
    assert ledger.load_agent(runtime.agent_id).state.schedules == {}
    [run_id] = [e.run_id for e in agent if isinstance(e, ev.RunQueued)]
    stored = ledger.stream(run_id)
    assert isinstance(stored[-1], ev.RunFailed)
    assert "a commit failed" in stored[-1].error


class Counting:
    """The in-process litellm, counting the model calls."""

    def __init__(self) -> None:
        self.inner = LiteLLM()
        self.calls = 0

    async def complete(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], t: float
    ) -> Answer:
        self.calls += 1
        return await self.inner.complete(model, messages, tools, t)


def test_a_capability_outcome_is_durable_before_the_run_goes_on(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = Registry()

    @registry.capability("Place an order.")
    def place_order(symbol: str) -> dict[str, Any]:
        return {"placed": symbol}

    counting = Counting()
    runtime = AgentRuntime(
        ledger, f"placed-{uuid.uuid4().hex[:6]}", models=["x"], registry=registry, llm=counting
    )
    failing_when(
        ledger,
        monkeypatch,
        lambda e: isinstance(e, ev.ToolCallSucceeded) and e.tool == "place_order",
    )
    steps = [
        {"tool_calls": [call("place_order", symbol="ACME")]},
        decide(1),
        decide(2),
        {"content": "done"},
    ]
    with pytest.raises(LedgerUnavailable):
        run_script(runtime, "placed", steps)
    monkeypatch.undo()

    # the commit carrying the order's outcome (with log_decision's request) was waited for:
    # its loss stopped the run before log_decision ran and before a third model call
    assert counting.calls == 2
    [run_id] = ledger.list_runs(runtime.agent_id)
    stored = ledger.stream(run_id)
    assert [type(e).__name__ for e in stored][-2:] == ["ToolCallRequested", "RunFailed"]
    assert stored[-2].tool == "place_order"
