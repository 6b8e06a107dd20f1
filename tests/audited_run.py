"""A recorded run for the audit tests: an agent checks the market, decides, schedules, ends."""

from __future__ import annotations

import asyncio
from typing import Any

from events import Ledger
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry

STEPS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "query_state", "arguments": {"state_name": "market_state"}}]},
    {
        "tool_calls": [
            {"name": "entry_check", "arguments": {"symbol": "AAPL"}},
            {"name": "log_decision", "arguments": {"reasoning": "calm", "decision_type": "other"}},
        ]
    },
    {"tool_calls": [{"name": "schedule_once", "arguments": {"delay_seconds": "0"}}]},
    {"content": "Entered nothing; checking again later."},
]


def record(ledger: Ledger) -> None:
    registry = Registry()
    calls: list[str] = []

    @registry.state("market_state")
    def market_state() -> dict[str, Any]:
        return {"open": True}

    @registry.capability("Check whether to enter a position.")
    def entry_check(symbol: str) -> dict[str, Any]:
        calls.append(symbol)
        return {"enter": False, "symbol": symbol}

    register_script("audited", STEPS)
    runtime = AgentRuntime(ledger, "audited", models=["scripted/audited"], registry=registry)
    result = asyncio.run(runtime.run("webhook", focus="look for entries"))
    runtime.close()
    assert result.status == "completed" and calls == ["AAPL"]
