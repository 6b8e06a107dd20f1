"""`owlclaw runs` as a user runs it, on the real ledger: an agent's latest runs with their plan's
progress, newest first; an unknown agent refused, naming the known ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events import Ledger
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.cli import owlclaw_on as owlclaw
from tests.scripted import call, play

pytestmark = pytest.mark.integration

PLAN = [
    {"text": "read the prices", "status": "done"},
    {"text": "check the news", "status": "done"},
    {"text": "size the hedge", "status": "in_progress"},
    {"text": "place it"},
    {"text": "report"},
]


def test_runs_show_the_plan_progress_newest_first(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        runtime = AgentRuntime(ledger, "planner", models=["scripted/none"])
        play(runtime, [{"content": "nothing to plan"}])
        play(
            runtime,
            [
                {"tool_calls": [call("update_plan", items=PLAN[:2])]},
                {"tool_calls": [call("update_plan", items=PLAN)]},
                {"content": "planned"},
            ],
            focus="hedge the book",
        )
        runtime.close()
        ledger.register_agent("watcher")

    listed = owlclaw(fresh_db, "runs", "planner", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    second, first = json.loads(listed.stdout)
    assert (second["run_no"], second["status"], second["focus"]) == (
        2,
        "completed",
        "hedge the book",
    )
    assert second["plan"] == "2/5 done" and second["iterations"] == 3 and second["tool_calls"] == 2
    assert second["ended_at"] is not None and second["cost_usd"] == 0
    assert (first["run_no"], first["plan"], first["plan_items"]) == (1, None, None)

    one = owlclaw(fresh_db, "runs", "planner", "--limit", "1", "--json", cwd=tmp_path)
    assert [r["run_no"] for r in json.loads(one.stdout)] == [2]

    human = owlclaw(fresh_db, "runs", "planner", cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    assert "2/5 done" in human.stdout and "hedge the book" in human.stdout

    unknown = owlclaw(fresh_db, "runs", "ghost", cwd=tmp_path)
    assert unknown.returncode == 3 and "Traceback" not in unknown.stderr
    assert "unknown agent 'ghost'; known agents: planner, watcher" in " ".join(
        unknown.stderr.split()
    )
