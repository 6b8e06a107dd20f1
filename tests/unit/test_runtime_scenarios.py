"""The runtime's decision loop with the scripted model, on the in-memory ledger: the acceptance
scenarios that need no views (scenario 2, recall, is in tests/integration), loop limits,
heartbeat skipping, tool retries."""

from __future__ import annotations

import asyncio
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry
from tests.scripted import call, run_events, run_script


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


def test_identical_call_loop_and_call_limit_stop_the_run(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "looper", models=["scripted/none"])
    looping = [{"tool_calls": [call("query_state", state_name="x")]}] * 10
    result = run_script(runtime, "loop", looping)
    assert result.status == "terminated"
    [end] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunTerminated)]
    assert "identical arguments" in end.reason


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


def test_a_later_run_lists_its_schedules_and_cancels_one(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    first = run_script(
        runtime,
        "l1",
        [
            {"tool_calls": [call("schedule_cron", cron_expression="0 9 * * 1-5", focus="open")]},
            {"content": "ok"},
        ],
    )
    [schedule_id] = ledger.load_agent("trader").state.schedules
    second = run_script(
        runtime,
        "l2",
        [
            {"tool_calls": [call("list_schedules")]},
            {"tool_calls": [call("cancel_schedule", schedule_id=schedule_id)]},
            {"content": "ok"},
        ],
    )
    assert second.tools_called == ["list_schedules", "cancel_schedule"]
    listed = next(e for e in run_events(ledger, second) if isinstance(e, ev.ToolCallSucceeded))
    [entry] = listed.result["schedules"]
    assert (entry["schedule_id"], entry["kind"], entry["cron_expression"]) == (
        schedule_id,
        "cron",
        "0 9 * * 1-5",
    )
    assert entry["owner_run_id"] == first.run_id
    assert ledger.load_agent("trader").state.schedules == {}
