"""``owlclaw bench registry``: many registered, passivated agents on this machine.

Registers the agents through the batch path (``Ledger.register_agents``) and, for contrast, a
sample one at a time (``Ledger.register_agent``); brings the agents view up to date; then
measures the database's size, ``owlclaw status --json`` as a user runs it (a new process, no
server running) and the console's agents page (its first page and one deep in the list)."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import msgspec

from events import Ledger
from events.ledger import REGISTER_BATCH
from owlclaw.bench.processes import timed_owlclaw
from owlclaw.compose.read import open_view
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.server.overview import overview_page
from projections import AgentsView, ProjectionRunner, RunsView, SchedulesView
from projections.agents import PAGE_SIZE

ONE_BY_ONE_SAMPLE = 1000


def _median_ms(fn: Callable[[], Any], times: int = 5) -> float:
    samples = []
    for _ in range(times):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(samples), 1)


def _status(db: Database) -> tuple[float, dict[str, Any]]:
    """``owlclaw status --json`` in a new process against ``db``: seconds taken, its report."""
    with tempfile.TemporaryDirectory() as data_dir:
        env = {
            **os.environ,
            "OWLCLAW_DATABASE_URL": db.url,
            "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
            "OWLCLAW_DATA_DIR": data_dir,
            "OWLCLAW_SERVER_PORT": "9",  # no server there: status says so at once
        }
        elapsed, printed = timed_owlclaw(["status", "--json"], env)
    report: dict[str, Any] = msgspec.json.decode(printed)
    return elapsed, report


def run(
    db: Database, agents: int = 100_000, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    ids = [f"agent-{i:06d}" for i in range(agents)]
    with Ledger(db.url) as ledger:
        progress(f"registering {agents:,} agents (batches)…")
        began = time.perf_counter()
        registered = ledger.register_agents(ids)
        batch_s = time.perf_counter() - began
        progress(f"registering {ONE_BY_ONE_SAMPLE:,} more one at a time…")
        began = time.perf_counter()
        for i in range(ONE_BY_ONE_SAMPLE):
            ledger.register_agent(f"single-{i:06d}")
        single_s = time.perf_counter() - began
        config = OwlClawConfig()
        agents_view = open_view(ledger, config, AgentsView)
        runs, schedules = (
            open_view(ledger, config, RunsView),
            open_view(ledger, config, SchedulesView),
        )
        progress("agents view catching up…")
        began = time.perf_counter()
        ProjectionRunner(ledger, agents_view).catch_up()
        catch_up_s = time.perf_counter() - began
        size = ledger.database.size()
        page_views = (agents_view, runs, schedules)
        deep = ids[agents // 2]

        def page(after: str | None) -> int:
            return len(overview_page(ledger, page_views, {}, "local", after, PAGE_SIZE).agents)

        first_ms, deep_ms = _median_ms(lambda: page(None)), _median_ms(lambda: page(deep))
    progress("owlclaw status --json…")
    status_s, report = _status(db)
    total = agents + ONE_BY_ONE_SAMPLE
    if report.get("registered_agents") != total:
        raise RuntimeError(f"status counted {report.get('registered_agents')} agents of {total}")
    return {
        "method": (
            f"{agents:,} agents registered {REGISTER_BATCH:,} per commit "
            f"(Ledger.register_agents), then {ONE_BY_ONE_SAMPLE:,} one at a time "
            "(Ledger.register_agent) for contrast, on one "
            "database; the agents view caught up; status is `owlclaw status --json` in a new "
            "process (imports included, no server running); the agents page is the console's "
            f"overview of {PAGE_SIZE} agents (first page, and one after the middle agent), "
            "median of 5"
        ),
        "registered_agents": total,
        "newly_registered_in_batches": registered,
        "batch_registration_s": round(batch_s, 1),
        "batch_registration_per_s": round(agents / batch_s),
        "one_by_one_registration_per_s": round(ONE_BY_ONE_SAMPLE / single_s),
        "agents_view_catch_up_s": round(catch_up_s, 1),
        "database_mb": round(size / 1024**2, 1),
        "status_json_s": round(status_s, 2),
        "status_registered_agents": report["registered_agents"],
        "agents_page_first_ms": first_ms,
        "agents_page_deep_ms": deep_ms,
        "page_size": PAGE_SIZE,
    }
