"""A view that cannot apply an event parks it and goes on; a dropped database connection is
raised instead, and the runner resumes from its tracked position."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import Cursor
from psycopg.rows import DictRow

from events import Ledger
from events import catalog as ev
from events.ledger_log import LoggedEvent
from events.run import Run
from owlclaw.compose.read import open_views
from owlclaw.database import Database
from owlclaw.timers.registrations import TimerRegistrations
from projections import MemoryView, ProjectionRunner, RunsView
from projections.embedders import EmbeddingUnavailable
from projections.failures import is_infrastructure
from projections.rebuild import rebuild
from projections.retry import retry_parked
from tests.cli import owlclaw_on as owlclaw
from tests.ledger_runs import record_runs, remember
from tests.postgres import rows

pytestmark = pytest.mark.integration


def execute(db: Database, statement: str) -> None:
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(statement)


def test_a_poison_event_is_parked_skipped_shown_and_applied_by_retry_after_the_fix(
    ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    agent = ledger.register_agent("poisoned")
    views = {v.name: v for v in open_views(ledger)}
    # The cause: the runs view cannot store a run that failed with error 'poison'.
    execute(
        fresh_db,
        "ALTER TABLE runs ADD CONSTRAINT no_poison CHECK (error IS DISTINCT FROM 'poison')",
    )
    runs = ProjectionRunner(ledger, views["runs"]).start()
    audit = ProjectionRunner(ledger, views["audit"]).start()
    record_runs(ledger, agent, 1)
    poisoned = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="doomed"))
    poisoned.record(ev.RunFailed, error="poison")
    *_, bad = ledger.append(agent, poisoned)
    record_runs(ledger, agent, 2)
    last = ledger.agent_history("poisoned")[-1].position
    assert runs.wait_for(last, timeout=10) and audit.wait_for(last, timeout=10)
    runs.stop()
    audit.stop()
    assert runs.error is None and audit.error is None

    [parked] = rows(
        fresh_db,
        "SELECT view_name, position, stream_id, topic, attempts, error FROM projection_errors",
    )
    assert parked[:5] == ("runs", bad, poisoned.id, "RunFailed", 4)
    assert parked[5].startswith("CheckViolation: ") and "no_poison" in parked[5]
    by_run = "SELECT focus, status, error FROM runs ORDER BY run_no"

    def runs_opened() -> list[tuple[object, ...]]:  # the focus is kept sealed
        return [(ledger.sealer.open(f), s, e) for f, s, e in rows(fresh_db, by_run)]

    assert runs_opened() == [
        ("run 0", "completed", None),
        ("doomed", "running", None),  # its RunFailed is skipped, nothing else of it
        ("run 0", "completed", None),
        ("run 1", "completed", None),
    ]
    assert rows(fresh_db, "SELECT count(*) FROM audit_tool_calls") == [(3 * 2,)]

    status = owlclaw(fresh_db, "projections", "status", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    report: dict[str, Any] = {s["name"]: s for s in json.loads(status.stdout)}
    assert report["runs"]["position"] == last and report["runs"]["parked_count"] == 1
    [shown] = report["runs"]["parked"]
    assert (shown["position"], shown["topic"], shown["stream_id"]) == (
        bad,
        "RunFailed",
        str(poisoned.id),
    )
    assert report["audit"]["parked_count"] == 0 and report["audit"]["position"] == last
    human = owlclaw(fresh_db, "projections", "status", cwd=tmp_path)
    assert f"runs at log position {bad}: RunFailed {poisoned.id}@" in human.stdout
    assert "    CheckViolation: " in human.stdout and "DETAIL" not in human.stdout

    [still] = retry_parked(ledger, RunsView(ledger))
    assert still.position == bad and still.error and "CheckViolation" in still.error
    assert rows(fresh_db, "SELECT attempts FROM projection_errors") == [(5,)]

    execute(fresh_db, "ALTER TABLE runs DROP CONSTRAINT no_poison")
    retried = owlclaw(fresh_db, "projections", "retry", "runs", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert f"applied RunFailed at log position {bad}" in retried.stdout
    assert rows(fresh_db, "SELECT count(*) FROM projection_errors") == [(0,)]
    assert ("doomed", "failed", "poison") in runs_opened()

    unknown = owlclaw(fresh_db, "projections", "retry", "nope", cwd=tmp_path)
    assert unknown.returncode == 3 and "unknown projection 'nope'" in unknown.stderr


class RunsViewKilledOnce(RunsView):
    """The runs view, whose database connection is terminated once, while applying the first
    event after ``kill_after``."""

    kill_after: int | None = None

    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        if self.kill_after is not None and logged.position > self.kill_after:
            self.kill_after = None
            curs.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        super().apply(curs, logged)


def test_a_killed_connection_is_raised_not_parked_and_serve_resumes_exactly(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("steady")
    view = RunsViewKilledOnce(ledger)
    view.create_table()
    runner = ProjectionRunner(ledger, view)
    raised: list[BaseException] = []

    def serve(stop: threading.Event) -> threading.Thread:
        def target() -> None:
            try:
                runner.serve(stop)
            except Exception as e:
                raised.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    def tracked() -> int:
        [(position,)] = rows(
            fresh_db,
            "SELECT notification_id FROM projection_tracking WHERE application_name = 'runs'",
        )
        return int(position)

    # The LISTEN connection dropped while serve waits for the log.
    first = serve(threading.Event())
    record_runs(ledger, agent, 5)
    assert runner.wait_for(ledger.agent_history("steady")[-1].position, timeout=10)
    execute(
        fresh_db,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    first.join(timeout=10)
    assert not first.is_alive(), "serve must raise when its LISTEN connection drops"
    assert len(raised) == 1 and is_infrastructure(raised[0])

    # The connection of a batch's transaction terminated while the view applies it.
    before = tracked()
    view.kill_after = before
    record_runs(ledger, agent, 5)
    second = serve(threading.Event())
    second.join(timeout=10)
    assert not second.is_alive(), "serve must raise when its transaction's connection dies"
    assert len(raised) == 2 and is_infrastructure(raised[1]) and view.kill_after is None
    assert tracked() == before

    stop = threading.Event()
    third = serve(stop)
    last = ledger.agent_history("steady")[-1].position
    assert runner.wait_for(last, timeout=10)
    stop.set()
    third.join(timeout=10)
    assert len(raised) == 2
    assert tracked() == last
    assert rows(
        fresh_db, "SELECT count(*), min(tool_calls), max(tool_calls), max(iterations) FROM runs"
    ) == [(10, 2, 2, 2)]
    assert rows(fresh_db, "SELECT count(*) FROM projection_errors") == [(0,)]


class RegistrationsFailingOnCancel(TimerRegistrations):
    """The timers view with a bug: it raises on every ScheduleCancelled."""

    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        super().apply(curs, logged)
        if isinstance(logged.event, ev.ScheduleCancelled):
            raise RuntimeError("cancel is broken")


def test_a_retried_batch_records_each_timer_registration_once(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("timed")
    for schedule_id in ("s-ok", "s-bad"):
        agent.record(
            ev.ScheduleRequested,
            schedule_id=schedule_id,
            kind="once",
            focus="check",
            delay_seconds=60,
            agent_id="timed",
        )
    agent.record(ev.ScheduleCancelled, schedule_id="s-bad", reason="changed my mind")
    *_, cancelled = ledger.append(agent)
    view = RegistrationsFailingOnCancel(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up(until=cancelled)
    assert rows(fresh_db, "SELECT view_name, position, topic, error FROM projection_errors") == [
        ("timers", cancelled, "ScheduleCancelled", "RuntimeError: cancel is broken")
    ]
    registered = [
        e.schedule_id for e in ledger.stream(agent.id) if isinstance(e, ev.ScheduleRegistered)
    ]
    assert registered == ["s-ok"]  # not once per failed attempt of the batch
    assert rows(fresh_db, "SELECT schedule_id FROM timers ORDER BY 1") == [("s-bad",), ("s-ok",)]


class OutageEmbedder:
    """An embedding service that is down until ``down`` is cleared."""

    model = "test/outage"
    dimensions = 8

    def __init__(self) -> None:
        self.down = True

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.down and texts:
            raise EmbeddingUnavailable("embedding model test/outage failed: connection refused")
        return [[1.0] + [0.0] * (self.dimensions - 1) for _ in texts]


def test_an_embedding_outage_delays_the_memory_view_and_parks_nothing(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("mindful")
    embedder = OutageEmbedder()
    view = MemoryView(ledger, embedder=embedder)
    view.create_table()
    last = remember(ledger, agent, ["the broker rate-limits", "rebounds within 2h"])
    runner = ProjectionRunner(ledger, view)
    with pytest.raises(EmbeddingUnavailable):
        runner.catch_up(until=last)
    assert runner.position < last
    assert rows(fresh_db, "SELECT count(*) FROM projection_errors") == [(0,)]
    embedder.down = False
    assert runner.catch_up(until=last) >= last
    assert rows(fresh_db, "SELECT count(*) FROM memories") == [(2,)]


class RunsViewRejectingPoison(RunsView):
    """The runs view with a bug: it raises on a run that failed with error 'poison'."""

    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        if isinstance(logged.event, ev.RunFailed) and logged.event.error == "poison":
            raise ValueError("cannot handle poison")
        super().apply(curs, logged)


def test_a_rebuild_replaces_the_parked_events_of_the_view_it_replaces(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("rebuilt")
    record_runs(ledger, agent, 1)
    poisoned = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="doomed"))
    poisoned.record(ev.RunFailed, error="poison")
    *_, bad = ledger.append(agent, poisoned)
    view = RunsViewRejectingPoison(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up(until=bad)
    parked = "SELECT view_name, position, error FROM projection_errors"
    expected = [("runs", bad, "ValueError: cannot handle poison")]
    assert rows(fresh_db, parked) == expected

    rebuild(ledger, RunsViewRejectingPoison)  # the bug still there: parked again, as `runs`
    assert rows(fresh_db, parked) == expected
    rebuild(ledger, RunsView)  # fixed
    assert rows(fresh_db, parked) == []
    runs = rows(fresh_db, "SELECT focus, status FROM runs")
    assert ("doomed", "failed") in [(ledger.sealer.open(f), s) for f, s in runs]  # sealed
