"""Replaying a recorded run for audit: the replay model, verification, `owlclaw replay`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.governance import Governance
from owlclaw.runtime.loop import AgentRuntime
from owlclaw.runtime.verify import replay_run
from tests.integration.test_cli_ledger import owlclaw

pytestmark = pytest.mark.integration

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


def test_replay_reproduces_the_recorded_steps_without_writing(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        head = ledger.head()
        report = replay_run(ledger, "audited", 1)
        assert report.matched, report.differences
        assert report.compared >= 10  # responses, requests, outcomes, rejection, the end
        assert ledger.head() == head  # audit reads, never writes


def test_replay_reports_where_todays_governance_diverges(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        report = replay_run(ledger, "audited", 1, governance=Governance(deny=("log_decision",)))
    assert not report.matched
    assert any("ToolCallDenied" in d and "log_decision" in d for d in report.differences)


def test_replay_model_refuses_to_invent_responses(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        run_id = ledger.list_runs("audited")[0]
        events = [e for e in ledger.stream(run_id) if not isinstance(e, ev.LLMResponded)][:3]
        events += [e for e in ledger.stream(run_id) if isinstance(e, ev.LLMResponded)][:1]
        from owlclaw.llm.replay import RecordedRun, register_recording

        truncated = RecordedRun(run_id, events)
        runtime = AgentRuntime(
            ledger, "audited", models=[register_recording(truncated)], replay=truncated
        )
        result = asyncio.run(runtime.run("webhook", focus="look for entries"))
    assert result.status == "failed"
    [failed] = [e for e in runtime.produced if isinstance(e, ev.RunFailed)]
    assert "recorded 1 model responses" in failed.error


def test_cli_replay_verify(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
    shown = owlclaw(fresh_db, "replay", "audited", "1", "--verify", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["verify"]["matched"] is True
    assert [s["type"] for s in data["steps"]][:2] == ["RunStarted", "VisibleToolsResolved"]
    text = owlclaw(fresh_db, "replay", "audited", "1", "--verify", cwd=tmp_path)
    assert text.returncode == 0 and "replay matches" in text.stdout
    missing = owlclaw(fresh_db, "replay", "audited", "9", cwd=tmp_path)
    assert missing.returncode == 3 and "has no run 9" in missing.stderr
