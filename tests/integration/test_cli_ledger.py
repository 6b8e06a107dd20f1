"""`owlclaw ledger` and `owlclaw verify` as a user runs them, including a tampered ledger."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from events.ledger_log import LedgerLog
from events.run import Run
from owlclaw.database import Database
from projections import MemoryView, ProjectionRunner
from projections.embedders import Embedder
from tests.cli import owlclaw_on as owlclaw
from tests.sample_run import AGENT_ID, record_sample_run

pytestmark = pytest.mark.integration


def test_ledger_json_lists_the_run_in_log_order(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)
    result = owlclaw(fresh_db, "ledger", AGENT_ID, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = json.loads(result.stdout)
    assert page["next_after"] is None  # the whole run fits in the default page
    events = page["events"]
    assert [e["type"] for e in events][:4] == [
        "AgentRegistered",
        "IdentityLoaded",
        "RunQueued",
        "RunStarted",
    ]
    assert events[-1]["type"] == "RunCompleted"
    assert [e["position"] for e in events] == sorted(e["position"] for e in events)
    decision = next(e for e in events if e["type"] == "DecisionLogged")
    assert decision["data"]["decision_type"] == "no_action"


def test_ledger_pages_explicitly_and_says_when_it_cut(fresh_db: Database, tmp_path: Path) -> None:
    """A page of --limit events says where the next one starts; following the cursors gives
    every event once, as --all does."""
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)

    def page(*options: str) -> dict[str, Any]:
        result = owlclaw(fresh_db, "ledger", AGENT_ID, "--json", *options, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    everything = page("--all")
    assert everything["next_after"] is None and len(everything["events"]) > 10
    pages = [page("--limit", "4")]
    while pages[-1]["next_after"] is not None:
        assert len(pages[-1]["events"]) == 4
        assert pages[-1]["next_after"] == pages[-1]["events"][-1]["position"]
        pages.append(page("--limit", "4", "--after", str(pages[-1]["next_after"])))
    assert [e for p in pages for e in p["events"]] == everything["events"]
    assert len(pages) == -(-len(everything["events"]) // 4)

    human = owlclaw(fresh_db, "ledger", AGENT_ID, "--limit", "4", cwd=tmp_path)
    fourth = everything["events"][3]["position"]
    assert human.returncode == 0, human.stderr
    assert f"4 events shown, more follow: owlclaw ledger {AGENT_ID} --after {fourth}" in " ".join(
        human.stdout.split()
    )


def test_verify_names_the_exact_event_altered_with_sql(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)
        run_id = ledger.list_runs(AGENT_ID)[0]
    ok = owlclaw(fresh_db, "verify", AGENT_ID, "--json", cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True

    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = convert_to(replace(convert_from(state, 'UTF8'),"
            " 'no_action', 'capability_selection'), 'UTF8')"
            " WHERE originator_id = %s AND originator_version = 8",
            (run_id,),
        )
    bad = owlclaw(fresh_db, "verify", AGENT_ID, "--json", cwd=tmp_path)
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    assert report["ok"] is False
    assert [(b["stream"], b["version"]) for b in report["breaks"]] == [(str(run_id), 8)]
    human = owlclaw(fresh_db, "verify", cwd=tmp_path)
    assert human.returncode == 1 and f"stream {run_id} version 8" in human.stdout


def test_unknown_agent_is_one_clear_line_and_exit_3(fresh_db: Database, tmp_path: Path) -> None:
    result = owlclaw(fresh_db, "ledger", "ghost", cwd=tmp_path)
    assert result.returncode == 3
    assert "unknown agent 'ghost'" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_database_is_one_clear_line_and_exit_4(tmp_path: Path) -> None:
    nowhere = Database(f"postgresql://postgres@/x?host={tmp_path}")
    result = owlclaw(nowhere, "ledger", "a", cwd=tmp_path)
    assert result.returncode == 4
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr


def test_projections_status_and_rebuild(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)
    status = owlclaw(fresh_db, "projections", "status", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    lag = {p["name"]: p["lag_events"] for p in json.loads(status.stdout)}
    assert lag == {
        "agents": 14,
        "audit": 14,
        "runs": 14,
        "memory": 14,
        "schedules": 14,
        "approval_notifications": 14,
        "outbox": 14,
    }
    rebuilt = owlclaw(fresh_db, "projections", "rebuild", "audit", "--json", cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout) == {"name": "audit", "position": 14}
    after = owlclaw(fresh_db, "projections", "status", "--json", cwd=tmp_path)
    assert {p["name"]: p["lag_events"] for p in json.loads(after.stdout)} == {
        "agents": 14,
        "audit": 0,
        "runs": 14,
        "memory": 14,
        "schedules": 14,
        "approval_notifications": 14,
        "outbox": 14,
    }
    versions = {
        p["name"]: (p["version"], p["code_version"], p["rebuilding"])
        for p in json.loads(after.stdout)
    }
    sealed = {name: versions.pop(name) for name in ("memory", "runs", "audit", "schedules")}
    # memory 2: provenance, 3: content sealed, 4: last recalled, archived and why (memory
    # ages); runs 2: focus sealed, 3: the plan's progress; audit 2: arguments and results
    # sealed; schedules 2: focus sealed, 3: each schedule's on_missed policy
    assert sealed == {
        "memory": (4, 4, None),
        "runs": (3, 3, None),
        "audit": (2, 2, None),
        "schedules": (3, 3, None),
    }
    assert set(versions.values()) == {(1, 1, None)}  # none rebuilding
    table = owlclaw(fresh_db, "projections", "status", cwd=tmp_path)
    assert "version" in table.stdout and "rebuilding" not in table.stdout, table.stdout
    unknown = owlclaw(fresh_db, "projections", "rebuild", "nope", cwd=tmp_path)
    assert unknown.returncode == 3 and "unknown projection 'nope'" in unknown.stderr


LESSON = "After sharp market drop, rebound signals are usually accurate within 2 hours"


def remember(ledger: Ledger, agent_id: str, *contents: str) -> int:
    """One run of ``agent_id`` that remembers ``contents``; the log position of its last event."""
    agent = ledger.register_agent(agent_id)
    run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook"))
    for content in contents:
        run.record(
            ev.MemoryRemembered,
            agent_id=agent_id,
            memory_id=uuid.uuid4(),
            content=content,
            tags=["trading"],
        )
    return ledger.append(agent, run)[-1]


def test_memory_command_writes_memory_md_and_recalls(
    fresh_db: Database, tmp_path: Path, local_embedder: object
) -> None:
    with Ledger(fresh_db.url) as ledger:
        remember(ledger, "trader", LESSON, "The coffee machine is on the third floor")
    result = owlclaw(
        fresh_db,
        "memory",
        "trader",
        "--recall",
        "market crash recovery",
        "--limit",
        "1",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    [memory] = data["recall"]["memories"]
    assert memory["content"] == LESSON
    assert data["warning"] is None
    memory_md = Path(data["memory_md"]).read_text()
    assert "The coffee machine is on the third floor" in memory_md
    assert memory_md.startswith("# MEMORY.md — trader")
    bad = owlclaw(fresh_db, "memory", "trader", "--limit", "21", cwd=tmp_path)
    assert bad.returncode == 2


def test_memory_command_recalls_what_was_committed_before_it_was_called(
    fresh_db: Database, tmp_path: Path, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recall-after-trigger race, made deterministic. A transaction older than the run's
    commit (another process's projection batch, say) holds the log's readable head below the
    memory, and ends only once the command has read that head; the command must still recall it."""
    from typer.testing import CliRunner

    from owlclaw.cli import app

    with psycopg.connect(fresh_db.url) as older, Ledger(fresh_db.url) as ledger:
        ledger.register_agent("trader")
        served = MemoryView(ledger, embedder=local_embedder)
        served.create_table()
        ProjectionRunner(ledger, served).catch_up()  # the served view is at the readable head
        older.execute("SELECT pg_current_xact_id()")
        position = remember(ledger, "trader", LESSON)
        assert ledger.log.head() < position

        readable_head = LedgerLog.head

        def head_then_older_ends(self: LedgerLog) -> int:
            head = readable_head(self)
            older.commit()
            return head

        monkeypatch.setattr(LedgerLog, "head", head_then_older_ends)
        result = CliRunner().invoke(
            app,
            ["memory", "trader", "--recall", "market rebound", "--json"],
            env={
                "OWLCLAW_DATABASE_URL": fresh_db.url,
                "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
                "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
            },
        )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [m["content"] for m in data["recall"]["memories"]] == [LESSON]
    assert data["warning"] is None and data["recall"]["warning"] is None
