"""Governance, identity reload and budgets of the runtime, on the in-memory ledger."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from tests.apps import make_app, skill
from tests.scripted import agent_events, call, decide, play, run_events, run_script


def test_rate_limit_denies_calls_beyond_the_window(ledger: Ledger) -> None:
    governance = Governance.from_app_config(
        {"governance": {"rate_limits": {"log_decision": {"calls": 2, "per_seconds": 3600}}}}
    )
    runtime = AgentRuntime(ledger, "limited", models=["x"], governance=governance)
    result = play(runtime, [decide(1), decide(2), decide(3), {"content": "ok"}])
    events = run_events(ledger, result)
    assert [e.tool for e in events if isinstance(e, ev.ToolCallSucceeded)] == ["log_decision"] * 2
    [denied] = [e for e in events if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason.startswith("rate limit: log_decision allows 2 calls per 3600 s")
    assert result.status == "completed"  # the model got RATE_LIMITED back and answered
    second = play(runtime, [decide(4), {"content": "ok"}])
    assert any(isinstance(e, ev.ToolCallDenied) for e in run_events(ledger, second))


def test_daily_token_budget_stops_runs_and_survives_a_restart(ledger: Ledger) -> None:
    # every scripted call uses 120 tokens; the check runs before each model call
    governance = Governance(daily_tokens=250)
    runtime = AgentRuntime(ledger, "thrifty", models=["x"], governance=governance)
    first = play(runtime, [decide(i) for i in range(10)])
    assert first.status == "terminated" and first.tokens == 360
    [exceeded] = [e for e in agent_events(ledger, "thrifty") if isinstance(e, ev.BudgetExceeded)]
    assert (exceeded.budget, exceeded.limit, exceeded.spent) == ("daily_tokens", 250, 360)
    assert str(exceeded.run_id) == first.run_id
    [ended] = [e for e in run_events(ledger, first) if isinstance(e, ev.RunTerminated)]
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
    events = run_events(ledger, result)
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
    prompt = asyncio.run(runtime.briefing.system_prompt(None, "webhook"))
    assert "Version two." in prompt.text and "Version one." not in prompt.text
    hashes = [
        next(e for e in run_events(ledger, r) if isinstance(e, ev.LLMResponded)).inputs[
            "soul_sha256"
        ]
        for r in (first, second, third)
    ]
    assert hashes == [loaded[0].soul_sha256, loaded[1].soul_sha256, loaded[1].soul_sha256]
    (root / "SOUL.md").write_text("x" * 20_000)  # over the limit: keep version two, warn
    play(runtime, [{"content": "hi"}])
    [warning] = [e for e in agent_events(ledger, "reloading") if isinstance(e, ev.AgentWarning)]
    assert "kept the previous identity" in warning.message and "limit" in warning.message
    assert "Version two." in asyncio.run(runtime.briefing.system_prompt(None, "webhook")).text


def test_governance_hides_denied_tools_with_reasons_and_refuses_calls_to_them(
    ledger: Ledger,
) -> None:
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
    assert Governance.from_app_config({"governance": {"deny": ["remember"]}}).deny == ("remember",)
    with pytest.raises(ValueError, match="governance"):
        Governance.from_app_config({"governance": {"dney": ["remember"]}})
