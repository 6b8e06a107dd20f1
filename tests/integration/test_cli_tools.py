"""`owlclaw tools` as a user runs it: per-tool figures from the audit view, and tools disabled
and enabled again in the ledger (no server serving the agent) for the agent's next run."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.bench import free_port
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.governance import OPERATOR_DISABLED
from tests.apps import make_app
from tests.cli import owlclaw as run_owlclaw
from tests.scripted import call, play, run_events

pytestmark = pytest.mark.integration

HANDLERS = """
from owlclaw import Registry

registry = Registry()


@registry.capability("Check whether to enter a position.")
def entry_check(symbol: str) -> dict[str, object]:
    if symbol == "FAIL":
        raise RuntimeError("market data unavailable")
    return {"enter": symbol == "AAPL"}
"""
GOVERNED = (
    '[governance]\ndeny = ["remember"]\n'
    "rate_limits = { log_decision = { calls = 2, per_seconds = 3600 } }\n"
)


def owlclaw(db: Database, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": db.url,
        "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
        "OWLCLAW_SERVER_PORT": str(free_port()),  # no server serves the agent
    }
    return run_owlclaw(env, *args, cwd=cwd, timeout=120)


def app_runtime(ledger: Ledger, root: Path, config: str = "") -> AgentRuntime:
    """A runtime serving an app with the entry_check capability (loaded from its directory)."""
    make_app(root, config=config)
    (root / "handlers.py").write_text(HANDLERS)
    return AgentRuntime(ledger, root.name, models=["x"], app_dir=root)


def record_quotes(ledger: Ledger, agent_id: str) -> None:
    """A run as the executor records it: durations, a truncated result, a timeout."""
    agent = ledger.load_agent(agent_id)
    run = Run.start(agent_id, agent.queue_run("webhook"))
    for i, ms in enumerate((10.0, 20.0, 30.0, 40.0)):
        run.record(ev.ToolCallRequested, call_id=f"q{i}", tool="quote", arguments={})
        run.record(
            ev.ToolCallSucceeded,
            call_id=f"q{i}",
            tool="quote",
            result={"price": i},
            duration_ms=ms,
            result_bytes=40_000 if i == 0 else 12,
            truncated=i == 0,
        )
    run.record(ev.ToolCallRequested, call_id="q4", tool="quote", arguments={})
    run.record(ev.ToolCallTimedOut, call_id="q4", tool="quote", timeout_s=1.0, duration_ms=1000.0)
    run.end(ev.RunCompleted, answer="quoted")
    ledger.append(agent, run)


def test_tool_stats_count_every_outcome_by_error_code(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        runtime = app_runtime(ledger, tmp_path / "counted", GOVERNED)
        turn = [
            call("entry_check", symbol="AAPL"),
            call("entry_check", symbol="FAIL"),
            call("entry_check", symbol=7),  # rejected: not a string
            call("remember", content="denied by governance"),
            *(call("log_decision", reasoning=f"step {i}") for i in range(3)),  # 3rd: limited
        ]
        play(runtime, [{"tool_calls": turn}, {"content": "done"}])
        record_quotes(ledger, "counted")
        runtime.close()
    result = owlclaw(fresh_db, "tools", "counted", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["agent_id"], report["disabled"], report["warning"]) == ("counted", [], None)
    stats = {t.pop("tool"): t for t in report["tools"]}
    assert list(stats) == ["entry_check", "log_decision", "quote", "remember"]
    entry, decisions = stats["entry_check"], stats["log_decision"]
    assert (entry["p50_ms"], entry["p95_ms"]) != (None, None)
    assert {k: v for k, v in entry.items() if not k.endswith("_ms")} == {
        "calls": 3,
        "succeeded": 1,
        "errors": {"REJECTED": 1, "TOOL_FAILED": 1},
        "timeouts": 0,
        "truncated": 0,
    }
    assert (decisions["calls"], decisions["succeeded"]) == (3, 2)
    assert decisions["errors"] == {"RATE_LIMITED": 1}
    assert stats["quote"] == {
        "calls": 5,
        "succeeded": 4,
        "errors": {},
        "timeouts": 1,
        "p50_ms": 30.0,
        "p95_ms": 808.0,  # percentile_cont over 10, 20, 30, 40, 1000
        "truncated": 1,
    }
    assert stats["remember"] == {
        "calls": 1,
        "succeeded": 0,
        "errors": {"DENIED": 1},
        "timeouts": 0,
        "p50_ms": None,
        "p95_ms": None,
        "truncated": 0,
    }
    table = owlclaw(fresh_db, "tools", "counted", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "quote" in table.stdout and "disabled tools: none" in table.stdout
    unknown = owlclaw(fresh_db, "tools", "ghost", cwd=tmp_path)
    assert unknown.returncode == 3 and "unknown agent 'ghost'" in unknown.stderr


def test_disable_and_enable_change_the_next_run_and_are_recorded(
    fresh_db: Database, tmp_path: Path
) -> None:
    check = {"tool_calls": [call("entry_check", symbol="AAPL")]}
    with Ledger(fresh_db.url) as ledger:
        runtime = app_runtime(ledger, tmp_path / "operated")
        play(runtime, [{"content": "first run"}])
        off = owlclaw(
            fresh_db, "tools", "operated", "--disable", "entry_check", "--json", cwd=tmp_path
        )
        assert off.returncode == 0, off.stderr
        change = json.loads(off.stdout)
        assert (change["disabled"], change["via"]) == (["entry_check"], "ledger")
        assert isinstance(change["position"], int)
        hidden = run_events(ledger, play(runtime, [check, {"content": "ok"}]))
        [visible] = [e for e in hidden if isinstance(e, ev.VisibleToolsResolved)]
        assert "entry_check" not in visible.tools
        assert visible.filtered == {"entry_check": OPERATOR_DISABLED}
        [denied] = [e for e in hidden if isinstance(e, ev.ToolCallDenied)]
        assert (denied.tool, denied.reason) == ("entry_check", OPERATOR_DISABLED)

        verified = owlclaw(fresh_db, "replay", "operated", "2", "--verify", cwd=tmp_path)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        unknown = owlclaw(fresh_db, "tools", "operated", "--disable", "nope", cwd=tmp_path)
        assert unknown.returncode == 2 and "has no tool 'nope'" in unknown.stderr
        assert "Traceback" not in unknown.stderr

        on = owlclaw(fresh_db, "tools", "operated", "--enable", "entry_check", cwd=tmp_path)
        assert on.returncode == 0 and "disabled tools: none" in on.stdout
        shown = run_events(ledger, play(runtime, [check, {"content": "ok"}]))
        [visible] = [e for e in shown if isinstance(e, ev.VisibleToolsResolved)]
        assert "entry_check" in visible.tools and visible.filtered == {}
        assert [e.tool for e in shown if isinstance(e, ev.ToolCallSucceeded)] == ["entry_check"]
        runtime.close()
    history = owlclaw(fresh_db, "ledger", "operated", "--all", "--json", cwd=tmp_path)
    events = json.loads(history.stdout)["events"]
    changes = [e["data"] for e in events if e["type"] == "ToolsChanged"]
    by = f"local:{getpass.getuser()}"  # no server: the CLI wrote the ledger directly
    assert changes == [
        {"enabled": [], "disabled": ["entry_check"], "by": by},
        {"enabled": ["entry_check"], "disabled": [], "by": by},
    ]
    stats = json.loads(owlclaw(fresh_db, "tools", "operated", "--json", cwd=tmp_path).stdout)
    [entry] = [t for t in stats["tools"] if t["tool"] == "entry_check"]
    assert (entry["calls"], entry["succeeded"], entry["errors"]) == (2, 1, {"DENIED": 1})
