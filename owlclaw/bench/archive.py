"""``owlclaw bench archive``: what archiving gives back on an agent with many ended runs.

The runs are written through the ledger as a runtime writes them (RunQueued and RunSealed on
the agent's stream, seven events per run: start, visible tools, a model call with a tool call,
its request and result, the answer, the end), many runs per commit so that writing them takes
seconds. Then the database's size (``pg_database_size``) and the events table's
(``pg_total_relation_size``) are read before archiving, after it, after a plain VACUUM (space
reusable, rarely returned to the disk) and after VACUUM FULL (tables rewritten), with the
archive's bytes on disk and how long archiving and verifying (archive included) took."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.audit.chains import verify_agent

AGENT = "archived"
RUNS_PER_COMMIT = 100


def _record_runs(ledger: Ledger, runs: int, progress: Callable[[str], None]) -> None:
    agent = ledger.register_agent(AGENT)
    for start in range(0, runs, RUNS_PER_COMMIT):
        progress(f"writing runs {start + 1:,}-{min(runs, start + RUNS_PER_COMMIT):,} of {runs:,}")
        batch = []
        for n in range(start, min(runs, start + RUNS_PER_COMMIT)):
            run = Run.start(AGENT, agent.queue_run("webhook", focus=f"check ticket {n}"))
            run.record(ev.VisibleToolsResolved, tools=["lookup_ticket", "remember", "recall"])
            call = {"id": f"c{n}", "function": {"name": "lookup_ticket", "arguments": "{}"}}
            run.record(
                ev.LLMResponded,
                model="scripted/bench",
                message={"role": "assistant", "content": None, "tool_calls": [call]},
                usage={"prompt_tokens": 420, "completion_tokens": 18, "total_tokens": 438},
                cost_usd=0.00012,
                latency_ms=310.0,
            )
            run.record(
                ev.ToolCallRequested,
                call_id=f"c{n}",
                tool="lookup_ticket",
                arguments={"ticket": f"T-{n}"},
            )
            run.record(
                ev.ToolCallSucceeded,
                call_id=f"c{n}",
                tool="lookup_ticket",
                result={"ticket": f"T-{n}", "status": "open", "summary": "printer offline " * 4},
                duration_ms=12.0,
            )
            run.record(
                ev.LLMResponded,
                model="scripted/bench",
                message={"role": "assistant", "content": f"Ticket T-{n} is open; escalated."},
                usage={"prompt_tokens": 510, "completion_tokens": 12, "total_tokens": 522},
                cost_usd=0.00014,
                latency_ms=280.0,
            )
            run.end(ev.RunCompleted, iterations=2, tool_calls=1, answer=f"T-{n} escalated")
            ledger.seal(agent, run)
            batch.append(run)
        ledger.append(agent, *batch)


def _sizes(url: str, label: str, figures: dict[str, Any]) -> None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_database_size(current_database()), pg_total_relation_size('ledger_events')"
        ).fetchone()
    assert row is not None
    figures[f"database_mb_{label}"] = round(row[0] / 1024**2, 1)
    figures[f"events_table_mb_{label}"] = round(row[1] / 1024**2, 1)


def _vacuum(url: str, full: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM FULL" if full else "VACUUM")


def run(
    url: str, runs: int = 10_000, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "method": (
            f"one agent, {runs:,} ended runs of 7 events written through the ledger "
            f"({RUNS_PER_COMMIT} runs a commit, each sealed); `archive --before` tomorrow moves "
            "them all; sizes by pg_database_size and pg_total_relation_size('ledger_events'); "
            "verify is the agent's, its archive files included"
        ),
        "runs": runs,
    }
    with (
        tempfile.TemporaryDirectory() as directory,
        Ledger(url, archive_dir=Path(directory)) as ledger,
    ):
        began = time.perf_counter()
        _record_runs(ledger, runs, progress)
        figures["write_s"] = round(time.perf_counter() - began, 1)
        _sizes(url, "before", figures)
        progress("archiving…")
        began = time.perf_counter()
        everything = ledger.log.last_committed()  # no views here to wait for
        done = ledger.archive.archive_agent(
            AGENT, datetime.now(UTC) + timedelta(days=1), everything
        )
        figures["archive_s"] = round(time.perf_counter() - began, 1)
        figures["archived_runs"] = done.runs
        figures["archived_events"] = done.events
        figures["archive_files"] = len(done.files)
        figures["archive_mb_on_disk"] = round(
            sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file()) / 1024**2, 2
        )
        _sizes(url, "after_archive", figures)
        progress("VACUUM…")
        _vacuum(url, full=False)
        _sizes(url, "after_vacuum", figures)
        progress("VACUUM FULL…")
        _vacuum(url, full=True)
        _sizes(url, "after_vacuum_full", figures)
        progress("verifying…")
        began = time.perf_counter()
        report = verify_agent(ledger, AGENT)
        figures["verify_s"] = round(time.perf_counter() - began, 1)
        if not report.ok or report.archived_runs != runs:
            raise RuntimeError(f"verify after archiving failed: {report}")
        figures["verified_events"] = report.events
    return figures
