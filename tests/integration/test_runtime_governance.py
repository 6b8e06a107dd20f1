"""Governance, identity reload, prompt inputs and budgets of the runtime, on the real ledger."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.config import RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.governance import Governance
from owlclaw.runtime.loop import AgentRuntime, RunResult
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from tests.apps import make_app, skill

pytestmark = pytest.mark.integration


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def decide(i: int) -> dict[str, Any]:
    return {"tool_calls": [call("log_decision", reasoning=f"step {i}", decision_type="other")]}


def play(runtime: AgentRuntime, steps: list[Any], focus: str | None = None) -> RunResult:
    name = f"s{uuid.uuid4().hex[:8]}"
    register_script(name, steps)
    runtime.models = [f"scripted/{name}"]
    return asyncio.run(runtime.run("webhook", focus=focus))


def events_of(ledger: Ledger, result: RunResult) -> list[ev.LedgerEvent]:
    return ledger.stream(uuid.UUID(result.run_id))


def agent_events(ledger: Ledger, agent_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(ledger.load_agent(agent_id).id)


def test_rate_limit_denies_calls_beyond_the_window(ledger: Ledger) -> None:
    governance = Governance.from_app_config(
        {"governance": {"rate_limits": {"log_decision": {"calls": 2, "per_seconds": 3600}}}}
    )
    runtime = AgentRuntime(ledger, "limited", models=["x"], governance=governance)
    result = play(runtime, [decide(1), decide(2), decide(3), {"content": "ok"}])
    events = events_of(ledger, result)
    assert [e.tool for e in events if isinstance(e, ev.ToolCallSucceeded)] == ["log_decision"] * 2
    [denied] = [e for e in events if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason.startswith("rate limit: log_decision allows 2 calls per 3600 s")
    assert result.status == "completed"  # the model got RATE_LIMITED back and answered
    second = play(runtime, [decide(4), {"content": "ok"}])
    assert any(isinstance(e, ev.ToolCallDenied) for e in events_of(ledger, second))


def test_daily_token_budget_stops_runs_and_survives_a_restart(ledger: Ledger) -> None:
    # every scripted call uses 120 tokens; the check runs before each model call
    governance = Governance(daily_tokens=250)
    runtime = AgentRuntime(ledger, "thrifty", models=["x"], governance=governance)
    first = play(runtime, [decide(i) for i in range(10)])
    assert first.status == "terminated" and first.tokens == 360
    [exceeded] = [e for e in agent_events(ledger, "thrifty") if isinstance(e, ev.BudgetExceeded)]
    assert (exceeded.budget, exceeded.limit, exceeded.spent) == ("daily_tokens", 250, 360)
    assert str(exceeded.run_id) == first.run_id
    [ended] = [e for e in events_of(ledger, first) if isinstance(e, ev.RunTerminated)]
    assert "daily_tokens budget exceeded" in ended.reason
    runtime.close()
    restarted = AgentRuntime(ledger, "thrifty", models=["x"], governance=governance)
    second = play(restarted, [decide(1)])
    assert second.status == "terminated" and second.iterations == 0
    assert ledger.load_agent("thrifty").state.budget_exceeded == 2


def test_skill_constraints_hide_capabilities_with_reasons(ledger: Ledger, tmp_path: Path) -> None:
    hour = datetime.now(UTC).hour
    closed = f"{(hour + 1) % 24}, {(hour + 2) % 24}"
    root = make_app(
        tmp_path / "app",
        {
            "entry_check": skill("entry_check", extra="  constraints:\n    visible: false\n"),
            "exit_check": skill("exit_check", extra=f"  constraints:\n    hours_utc: [{closed}]\n"),
            "broken": skill("broken", extra="  constraints:\n    visibel: false\n"),
        },
    )
    registry = Registry()

    @registry.capability("Check whether to enter.")
    def entry_check(symbol: str) -> dict[str, Any]:
        return {"enter": True}

    @registry.capability("Check whether to exit.")
    def exit_check(symbol: str) -> dict[str, Any]:
        return {"exit": True}

    runtime = AgentRuntime(ledger, "skilled", models=["x"], app=load_app(root), registry=registry)
    result = play(runtime, [{"tool_calls": [call("entry_check", symbol="AAPL")]}])
    events = events_of(ledger, result)
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    assert "entry_check" not in visible.tools and "exit_check" not in visible.tools
    assert visible.filtered["entry_check"].startswith("hidden by skill entry_check")
    assert visible.filtered["exit_check"].startswith("outside skill exit_check's hours_utc")
    assert [e.tool for e in events if isinstance(e, ev.ToolCallDenied)] == ["entry_check"]
    warnings = [e for e in agent_events(ledger, "skilled") if isinstance(e, ev.AgentWarning)]
    assert [w.source for w in warnings] == ["skills"] and "broken" in warnings[0].message


def test_hot_reload_records_identity_and_the_next_run_uses_it(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "app", soul="# Soul\nVersion one.\n")
    runtime = AgentRuntime(ledger, "reloading", models=["x"], app=load_app(root))
    first = play(runtime, [{"content": "hi"}])
    (root / "SOUL.md").write_text("# Soul\nVersion two.\n")
    second = play(runtime, [{"content": "hi"}])
    third = play(runtime, [{"content": "hi"}])
    loaded = [e for e in agent_events(ledger, "reloading") if isinstance(e, ev.IdentityLoaded)]
    assert len(loaded) == 2 and loaded[0].soul_sha256 != loaded[1].soul_sha256
    prompt = asyncio.run(runtime.system_prompt(None, "webhook"))
    assert "Version two." in prompt.text and "Version one." not in prompt.text
    hashes = [
        next(e for e in events_of(ledger, r) if isinstance(e, ev.LLMResponded)).inputs[
            "soul_sha256"
        ]
        for r in (first, second, third)
    ]
    assert hashes == [loaded[0].soul_sha256, loaded[1].soul_sha256, loaded[1].soul_sha256]
    (root / "SOUL.md").write_text("x" * 20_000)  # over the limit: keep version two, warn
    play(runtime, [{"content": "hi"}])
    [warning] = [e for e in agent_events(ledger, "reloading") if isinstance(e, ev.AgentWarning)]
    assert "kept the previous identity" in warning.message and "limit" in warning.message
    assert "Version two." in asyncio.run(runtime.system_prompt(None, "webhook")).text


def test_prompt_carries_recalled_memories_and_recent_activity(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger.datastore, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        runtime = AgentRuntime(ledger, "mindful", models=["x"], memory=MemoryStore(view))
        lesson = "Rebounds after a sharp drop are reliable within two hours"
        play(
            runtime,
            [
                {"tool_calls": [call("remember", content=lesson)]},
                {"tool_calls": [call("log_decision", reasoning="wait", decision_type="no_action")]},
                {"content": "noted"},
            ],
        )
        assert MemoryStore(view).wait_for(ledger.head(), timeout=10)
        result = play(runtime, [{"content": "ok"}], focus="market crash recovery")
    finally:
        runner.stop()
    prompt = asyncio.run(runtime.system_prompt("market crash recovery", "webhook"))
    assert lesson in prompt.text
    assert "decided (no_action): wait" in prompt.text and "answered: noted" in prompt.text
    [response] = [e for e in events_of(ledger, result) if isinstance(e, ev.LLMResponded)]
    assert list(response.inputs["memories"]) == [
        str(m.memory_id)
        for m in MemoryStore(view).recall("mindful", "market crash recovery", 5).memories
    ]


def test_degraded_recall_is_recorded_as_a_run_warning(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger.datastore, embedder=local_embedder)
    view.create_table()  # no runner: the view never reaches the run's position
    runtime = AgentRuntime(
        ledger,
        "hasty",
        models=["x"],
        memory=MemoryStore(view),
        limits=RuntimeConfig(recall_in_prompt=0),
    )
    result = play(
        runtime,
        [
            {"tool_calls": [call("remember", content="a fact")]},
            {"tool_calls": [call("recall", query="fact")]},
            {"content": "ok"},
        ],
    )
    [warning] = [e for e in events_of(ledger, result) if isinstance(e, ev.RunWarning)]
    assert warning.source == "recall" and "has not reached log position" in warning.message
