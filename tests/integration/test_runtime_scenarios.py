"""The seeds' four acceptance scenarios, driven by the scripted model on the real ledger."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.loop import AgentRuntime, RunResult
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder

pytestmark = pytest.mark.integration


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def run_script(runtime: AgentRuntime, script: str, steps: list[Any], **kwargs: Any) -> RunResult:
    register_script(script, steps)
    runtime.models = [f"scripted/{script}"]
    return asyncio.run(runtime.run(**{"trigger": "webhook", **kwargs}))


def run_events(ledger: Ledger, result: RunResult) -> list[ev.LedgerEvent]:
    import uuid

    return ledger.stream(uuid.UUID(result.run_id))


def test_scenario_1_schedule_once_records_delay_and_focus(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    result = run_script(
        runtime,
        "s1",
        [
            {
                "tool_calls": [
                    call("schedule_once", delay_seconds=300, focus="check entry opportunities")
                ]
            },
            {"content": "Scheduled a check in 5 minutes."},
        ],
    )
    assert result.status == "completed" and result.tools_called == ["schedule_once"]
    [requested] = [
        e
        for e in ledger.stream(ledger.load_agent("trader").id)
        if isinstance(e, ev.ScheduleRequested)
    ]
    assert (requested.kind, requested.delay_seconds, requested.focus) == (
        "once",
        300,
        "check entry opportunities",
    )
    assert str(requested.owner_run_id) == result.run_id
    assert requested.schedule_id in ledger.load_agent("trader").state.schedules


def test_scenario_2_remember_then_recall_in_a_later_run(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger.datastore, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        runtime = AgentRuntime(ledger, "trader", models=["scripted/none"], memory=MemoryStore(view))
        lesson = "After sharp drop, rebound signals accurate within 2h"
        run_script(
            runtime,
            "s2a",
            [
                {"tool_calls": [call("remember", content=lesson, tags=["trading", "lesson"])]},
                {"content": "Noted."},
            ],
        )
        result = run_script(
            runtime,
            "s2b",
            [
                {"tool_calls": [call("recall", query="market crash recovery")]},
                {"content": "Rebounds are reliable within 2 hours."},
            ],
        )
    finally:
        runner.stop()
    [outcome] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert outcome.result["memories"][0]["content"] == lesson
    assert outcome.result["memories"][0]["tags"] == ["trading", "lesson"]


def test_scenario_3_query_state_then_no_action_without_capabilities(ledger: Ledger) -> None:
    registry = Registry()
    entries: list[str] = []

    @registry.state("market_state")
    def market_state() -> dict[str, Any]:
        return {"is_trading_time": False}

    @registry.capability("Check whether to enter a position.")
    async def entry_check(symbol: str) -> dict[str, Any]:
        entries.append(symbol)
        return {"enter": False}

    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"], registry=registry)
    result = run_script(
        runtime,
        "s3",
        [
            {"tool_calls": [call("query_state", state_name="market_state")]},
            {
                "tool_calls": [
                    call(
                        "log_decision",
                        reasoning="Non-trading hours, skipping check",
                        decision_type="no_action",
                    )
                ]
            },
            {"content": "Nothing to do outside trading hours."},
        ],
    )
    assert result.status == "completed"
    assert result.tools_called == ["query_state", "log_decision"] and entries == []
    events = run_events(ledger, result)
    state_result = next(e for e in events if isinstance(e, ev.ToolCallSucceeded))
    assert state_result.result == {"is_trading_time": False}
    [decision] = [e for e in events if isinstance(e, ev.DecisionLogged)]
    assert (decision.decision_type, decision.reasoning) == (
        "no_action",
        "Non-trading hours, skipping check",
    )
    visible = next(e for e in events if isinstance(e, ev.VisibleToolsResolved))
    assert "entry_check" in visible.tools


def test_scenario_4_cancel_own_schedule_and_refuse_a_foreign_one(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    run_script(
        runtime,
        "s4a",
        [
            {"tool_calls": [call("schedule_once", delay_seconds=600, focus="recheck")]},
            {"content": "ok"},
        ],
    )
    [schedule_id] = ledger.load_agent("trader").state.schedules
    other = AgentRuntime(ledger, "intruder", models=["scripted/none"])
    refused = run_script(
        other,
        "s4b",
        [{"tool_calls": [call("cancel_schedule", schedule_id=schedule_id)]}, {"content": "ok"}],
    )
    [failure] = [e for e in run_events(ledger, refused) if isinstance(e, ev.ToolCallFailed)]
    assert failure.error_code == "SCHEDULE_NOT_FOUND"
    assert schedule_id in ledger.load_agent("trader").state.schedules
    run_script(
        runtime,
        "s4c",
        [{"tool_calls": [call("cancel_schedule", schedule_id=schedule_id)]}, {"content": "ok"}],
    )
    assert ledger.load_agent("trader").state.schedules == {}
    assert any(
        isinstance(e, ev.ScheduleCancelled) and e.schedule_id == schedule_id
        for e in ledger.stream(ledger.load_agent("trader").id)
    )


def test_bad_arguments_go_back_to_the_model_and_into_the_ledger(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    result = run_script(
        runtime,
        "bad",
        [
            {
                "tool_calls": [
                    {"name": "schedule_once", "arguments": "{not json"},
                    call("schedule_once", delay_seconds=0, focus="now"),
                    call("schedule_cron", cron_expression="*/10 * * * * *", focus="f"),
                    call("teleport", to="mars"),
                ]
            },
            {"content": "I will fix my arguments next time."},
        ],
    )
    assert result.status == "completed"
    events = run_events(ledger, result)
    rejected = [e.error for e in events if isinstance(e, ev.ToolCallRejected)]
    assert len(rejected) == 3
    assert "not valid JSON" in rejected[0] and "delay_seconds" in rejected[1]
    assert "unknown tool 'teleport'" in rejected[2]
    [cron] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert cron.error_code == "INVALID_CRON"


def test_identical_call_loop_and_call_limit_stop_the_run(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "looper", models=["scripted/none"])
    looping = [{"tool_calls": [call("query_state", state_name="x")]}] * 10
    result = run_script(runtime, "loop", looping)
    assert result.status == "terminated"
    [end] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunTerminated)]
    assert "identical arguments" in end.reason


def test_one_commit_per_tool_step(ledger: Ledger, fresh_db: Database) -> None:
    import psycopg

    runtime = AgentRuntime(ledger, "counter", models=["scripted/none"])
    steps = [{"tool_calls": [call("log_decision", reasoning=f"step {i}")]} for i in range(5)]
    result = run_script(runtime, "commits", [*steps, {"content": "done"}])
    with psycopg.connect(fresh_db.url) as conn:
        transactions = conn.execute(
            "SELECT count(DISTINCT transaction_id) FROM ledger_events WHERE originator_id = %s",
            (result.run_id,),
        ).fetchone()
    # 5 tool steps (each commits its request, carrying the previous result) + the final commit
    assert transactions == (6,)


def test_heartbeat_without_pending_events_skips_the_model(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "sleepy", models=["scripted/never-registered"])
    idle = asyncio.run(runtime.run("heartbeat"))
    assert (idle.status, idle.iterations) == ("skipped", 0)
    [skipped] = [e for e in run_events(ledger, idle) if isinstance(e, ev.RunSkipped)]
    assert skipped.reason == "heartbeat: no pending events"

    agent = ledger.load_agent("sleepy")
    agent.record(ev.InboundReceived, source="webhook", payload={"price": 101.5})
    ledger.append(agent)
    register_script("wake", [{"content": "Looked at the new price."}])
    runtime.models = ["scripted/wake"]
    awake = asyncio.run(runtime.run("heartbeat"))
    assert (awake.status, awake.iterations) == ("completed", 1)
    assert asyncio.run(runtime.run("heartbeat")).status == "skipped"  # the event was consumed


def test_one_trace_per_run_with_generations_and_tool_spans(
    ledger: Ledger, span_exporter: Any
) -> None:
    exporter = span_exporter
    runtime = AgentRuntime(ledger, "traced", models=["scripted/none"])
    result = run_script(
        runtime,
        "traced",
        [
            {
                "tool_calls": [
                    call("log_decision", reasoning="a"),
                    call("log_decision", reasoning="b"),
                ]
            },
            {"content": "done"},
        ],
    )
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {int(result.run_id.replace("-", ""), 16)}
    kinds = [s.attributes["langfuse.observation.type"] for s in spans]
    assert sorted(kinds) == ["agent", "generation", "generation", "tool", "tool"]
    root = next(s for s in spans if s.name == "agent_run")
    assert root.attributes["owlclaw.status"] == "completed"
    generation = next(s for s in spans if s.name == "llm")
    assert generation.attributes["langfuse.observation.model.name"] == "scripted/traced"
    assert '"total": 120' in generation.attributes["langfuse.observation.usage_details"]
    assert all(
        s.parent is not None and s.parent.span_id == root.context.span_id
        for s in spans
        if s is not root
    )


def test_idempotent_tools_are_retried_after_system_errors_others_are_not(ledger: Ledger) -> None:
    registry = Registry()
    attempts = {"quote": 0, "order": 0}

    @registry.capability("Latest quote.", idempotent=True)
    def quote(symbol: str) -> dict[str, Any]:
        attempts["quote"] += 1
        if attempts["quote"] < 3:
            raise ConnectionError("quote feed unavailable")
        return {"symbol": symbol, "price": 101.5}

    @registry.capability("Place an order.")
    def order(symbol: str, quantity: int) -> dict[str, Any]:
        attempts["order"] += 1
        raise ConnectionError("broker unavailable")

    runtime = AgentRuntime(ledger, "retrier", models=["scripted/none"], registry=registry)
    result = run_script(
        runtime,
        "retry",
        [
            {
                "tool_calls": [
                    call("quote", symbol="ACME"),
                    call("order", symbol="ACME", quantity=1),
                ]
            },
            {"content": "done"},
        ],
    )
    assert attempts == {"quote": 3, "order": 1}
    events = run_events(ledger, result)
    [ok] = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert ok.result == {"symbol": "ACME", "price": 101.5}
    [failed] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert (failed.tool, failed.error_code, failed.retryable) == ("order", "TOOL_FAILED", False)
    assert "broker unavailable" in failed.error


def test_remember_refuses_beyond_the_per_agent_memory_limit(
    ledger: Ledger, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from owlclaw.runtime import builtin_tools

    monkeypatch.setattr(builtin_tools, "MAX_MEMORIES", 2)
    view = MemoryView(ledger.datastore, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view)
    runtime = AgentRuntime(ledger, "hoarder", models=["scripted/none"], memory=MemoryStore(view))
    for i in range(3):
        result = run_script(
            runtime,
            f"hoard{i}",
            [{"tool_calls": [call("remember", content=f"fact {i}")]}, {"content": "ok"}],
        )
        runner.catch_up()
    [failed] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallFailed)]
    assert failed.error_code == "MEMORY_LIMIT"
    assert MemoryStore(view).count("hoarder") == 2


def test_governance_hides_denied_tools_with_reasons_and_refuses_calls_to_them(
    ledger: Ledger,
) -> None:
    from owlclaw.runtime.governance import Governance

    policy = Governance(
        allow=("query_state", "log_decision", "schedule_cron"), deny=("schedule_cron",)
    )
    runtime = AgentRuntime(ledger, "governed", models=["scripted/none"], governance=policy)
    result = run_script(
        runtime,
        "governed",
        [
            {
                "tool_calls": [
                    call("schedule_cron", cron_expression="0 * * * *", focus="f"),
                    call("remember", content="not allowed either"),
                ]
            },
            {"content": "I cannot do that."},
        ],
    )
    events = run_events(ledger, result)
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    assert visible.tools == ["query_state", "log_decision"]
    assert visible.filtered["schedule_cron"] == "denied by governance.deny"
    assert visible.filtered["remember"] == "not in governance.allow"
    denied = {e.tool: e.reason for e in events if isinstance(e, ev.ToolCallDenied)}
    assert denied == {
        "schedule_cron": "denied by governance.deny",
        "remember": "not in governance.allow",
    }
    assert not any(isinstance(e, ev.ToolCallRequested) for e in events)
    assert ledger.load_agent("governed").state.schedules == {}


def test_governance_policy_from_app_config_is_validated() -> None:
    from owlclaw.runtime.governance import Governance

    assert Governance.from_app_config({"governance": {"deny": ["remember"]}}).deny == ("remember",)
    with pytest.raises(ValueError, match="governance"):
        Governance.from_app_config({"governance": {"dney": ["remember"]}})
