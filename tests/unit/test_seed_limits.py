"""The built-in tools' limits from the specification, each seen by the model as a structured
error: at most 100 active schedules, an unknown state named with the known ones, reasoning of at
most 1,000 characters; and state providers that are coroutines are awaited."""

from __future__ import annotations

import uuid
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.builtin.handlers import MAX_ACTIVE_SCHEDULES
from owlclaw.tools.capabilities import Registry
from tests.scripted import call, play, run_events


def runtime_for(ledger: Ledger, registry: Registry, **limits: Any) -> AgentRuntime:
    return AgentRuntime(
        ledger,
        f"a{uuid.uuid4().hex[:8]}",
        models=["x"],
        registry=registry,
        limits=RuntimeConfig(**limits),
    )


def outcomes(ledger: Ledger, run: Any) -> list[ev.LedgerEvent]:
    return [
        e
        for e in run_events(ledger, run)
        if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallRejected)
    ]


def test_the_schedule_beyond_the_hundredth_active_one_is_refused(ledger: Ledger) -> None:
    runtime = runtime_for(ledger, Registry(), max_function_calls=200)
    schedules = [
        call("schedule_once", delay_seconds=3600, focus=f"check {i}")
        for i in range(MAX_ACTIVE_SCHEDULES + 1)
    ]
    result = play(runtime, [{"tool_calls": schedules}, {"content": "done"}])
    settled = outcomes(ledger, result)
    assert MAX_ACTIVE_SCHEDULES == 100
    assert [type(e) for e in settled[:100]] == [ev.ToolCallSucceeded] * 100
    [refused] = settled[100:]
    assert isinstance(refused, ev.ToolCallFailed)
    assert refused.error_code == "SCHEDULE_LIMIT"
    assert refused.error == "this agent already has 100 active schedules; cancel one first"
    assert len(ledger.load_agent(runtime.agent_id).state.schedules) == 100


def test_a_cancelled_schedule_frees_its_place_under_the_cap(ledger: Ledger) -> None:
    runtime = runtime_for(ledger, Registry(), max_function_calls=200)
    schedules = [
        call("schedule_once", delay_seconds=3600, focus=f"check {i}")
        for i in range(MAX_ACTIVE_SCHEDULES)
    ]
    play(runtime, [{"tool_calls": schedules}, {"content": "full"}])
    first = next(iter(ledger.load_agent(runtime.agent_id).state.schedules))
    again = [
        call("cancel_schedule", schedule_id=first),
        call("schedule_once", delay_seconds=3600, focus="one more"),
    ]
    result = play(runtime, [{"tool_calls": again}, {"content": "done"}])
    assert [type(e) for e in outcomes(ledger, result)] == [ev.ToolCallSucceeded] * 2


def test_an_unknown_state_is_an_error_naming_it_and_the_known_ones(ledger: Ledger) -> None:
    registry = Registry()

    @registry.state("market_state")
    def market() -> dict[str, str]:
        return {"trend": "up"}

    @registry.state("account_balance")
    def balance() -> int:
        return 5

    runtime = runtime_for(ledger, registry)
    result = play(
        runtime, [{"tool_calls": [call("query_state", state_name="weather")]}, {"content": "ok"}]
    )
    [failed] = outcomes(ledger, result)
    assert isinstance(failed, ev.ToolCallFailed)
    assert (failed.error_code, failed.retryable) == ("UNKNOWN_STATE", False)
    assert failed.error == (
        "unknown state 'weather'; available states: account_balance, market_state"
    )


def test_an_async_state_provider_is_awaited(ledger: Ledger) -> None:
    registry = Registry()

    @registry.state("positions")
    async def positions() -> list[str]:
        return ["BTC", "ETH"]

    runtime = runtime_for(ledger, registry)
    result = play(
        runtime, [{"tool_calls": [call("query_state", state_name="positions")]}, {"content": "ok"}]
    )
    [read] = outcomes(ledger, result)
    assert isinstance(read, ev.ToolCallSucceeded) and read.result == ["BTC", "ETH"]


def test_reasoning_of_1000_characters_is_logged_and_of_1001_refused(ledger: Ledger) -> None:
    runtime = runtime_for(ledger, Registry())
    calls = [call("log_decision", reasoning="r" * 1000), call("log_decision", reasoning="s" * 1001)]
    result = play(runtime, [{"tool_calls": calls}, {"content": "ok"}])
    refused, logged = outcomes(ledger, result)  # refused as it is admitted, before calls run
    assert isinstance(logged, ev.ToolCallSucceeded)
    assert isinstance(refused, ev.ToolCallRejected)
    assert refused.error == (
        "invalid arguments for log_decision: Expected `str` of length <= 1000 - at `$.reasoning`"
    )
    [decision] = [e for e in run_events(ledger, result) if isinstance(e, ev.DecisionLogged)]
    assert decision.reasoning == "r" * 1000
