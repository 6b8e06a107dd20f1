"""Projections over the real ledger: views, exactly-once across a kill, lag, rebuild, failures."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.compose.read import open_views
from owlclaw.database import Database
from projections import AuditView, ProjectionRunner, RunsView, SchedulesView
from projections.feed import LogBatch, follow_log_until, follow_projection
from projections.rebuild import rebuild
from projections.status import projection_status
from tests.integration.processes import run_projection
from tests.ledger_runs import record_runs
from tests.postgres import rows
from tests.sample_run import record_sample_run
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def test_audit_and_runs_views_describe_each_tool_call_and_run(
    ledger: Ledger, fresh_db: Database
) -> None:
    record_sample_run(ledger)
    agent = ledger.load_agent("demo-trader")
    failing = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="buy"))
    failing.record(
        ev.ToolCallRejected,
        call_id="bad",
        tool="schedule_once",
        error="delay_seconds: expected >= 1",
        arguments_text='{"delay_seconds": 0}',
    )
    failing.record(ev.RunFailed, error="model unavailable")
    ledger.append(agent, failing)
    for view in open_views(ledger):
        ProjectionRunner(ledger, view).catch_up()

    opened = ledger.sealer.open  # arguments and results are kept sealed
    audit = [
        (tool, status, opened(arguments), opened(result), *rest)
        for tool, status, arguments, result, *rest in rows(
            fresh_db,
            "SELECT tool, status, arguments, result, error, decision_type, tokens,"
            " agent_id FROM audit_tool_calls ORDER BY position",
        )
    ]
    assert audit == [
        (
            "query_state",
            "succeeded",
            {"state_name": "market_state"},
            {"is_trading_time": False, "session": "closed"},
            None,
            None,
            430,
            "demo-trader",
        ),
        (
            "log_decision",
            "succeeded",
            {"reasoning": "Market closed; no entry checks.", "decision_type": "no_action"},
            {"decision_id": "d-1"},
            None,
            "no_action",
            495,
            "demo-trader",
        ),
        (
            "schedule_once",
            "rejected",
            None,
            None,
            "delay_seconds: expected >= 1",
            None,
            None,
            "demo-trader",
        ),
    ]
    runs = [
        (trigger, opened(focus), *rest)
        for trigger, focus, *rest in rows(
            fresh_db,
            "SELECT trigger, focus, status, iterations, tool_calls, tokens, error"
            " FROM runs ORDER BY run_no",
        )
    ]
    assert runs == [
        ("heartbeat", "check entry opportunities", "completed", 3, 2, 1454, None),
        ("webhook", "buy", "failed", 0, 0, 0, "model unavailable"),
    ]


def test_a_killed_projection_resumes_exactly_where_it_committed(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("busy")
    record_runs(ledger, agent, 600, tools_per_run=3)
    head = ledger.log.last_committed()
    AuditView(ledger).create_table()
    ctx = mp.get_context("spawn")
    worker = ctx.Process(target=run_projection, args=(fresh_db.url, "audit"))
    worker.start()
    deadline = time.monotonic() + 60
    position = 0
    while position < head // 3:
        assert time.monotonic() < deadline and worker.is_alive(), "projection never got going"
        tracked = rows(
            fresh_db,
            "SELECT notification_id FROM projection_tracking WHERE application_name = 'audit'",
        )
        position = tracked[0][0] if tracked else 0
        time.sleep(0.005)
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()
    [(killed_at,)] = rows(
        fresh_db, "SELECT notification_id FROM projection_tracking WHERE application_name = 'audit'"
    )
    assert 0 < killed_at < head, "the kill must land mid-stream"

    view = AuditView(ledger)
    ProjectionRunner(ledger, view).catch_up()
    query = (
        "SELECT run_id, call_id, tool, arguments, status, result, tokens, position"
        " FROM audit_tool_calls ORDER BY run_id, call_id"
    )
    resumed = rows(fresh_db, query)
    assert len(resumed) == 600 * 3
    rebuild(ledger, AuditView)
    assert rows(fresh_db, query) == resumed


def test_lag_is_reported_in_events_and_seconds(ledger: Ledger) -> None:
    agent = ledger.register_agent("laggy")
    record_runs(ledger, agent, 1)
    views = {v.name: v for v in open_views(ledger)}
    audit, runs = views["audit"], views["runs"]
    ProjectionRunner(ledger, runs).catch_up()
    record_runs(ledger, agent, 2)
    time.sleep(0.2)
    status = projection_status(ledger, runs)
    assert status.lag_events == 2 * 9  # RunQueued, RunStarted, 2 x 3 tool events, RunCompleted
    assert status.lag_seconds >= 0.2
    assert projection_status(ledger, audit).lag_events == ledger.log.head()


def test_rebuild_switches_over_while_a_live_runner_keeps_serving(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("live")
    record_runs(ledger, agent, 50)
    view = RunsView(ledger)
    view.create_table()
    live = ProjectionRunner(ledger, view).start()
    writer = threading.Thread(target=record_runs, args=(ledger, agent, 100))
    writer.start()
    seen_during_rebuild: list[int] = []

    def watch(done: int, total: int) -> None:
        seen_during_rebuild.append(rows(fresh_db, "SELECT count(*) FROM runs")[0][0])

    rebuild(ledger, RunsView, progress=watch)
    writer.join()
    assert live.wait_for(ledger.log.last_committed(), timeout=10)
    live.stop()
    assert live.error is None
    assert seen_during_rebuild and min(seen_during_rebuild) > 0  # the old view kept serving
    assert rows(fresh_db, "SELECT count(*), count(DISTINCT run_no) FROM runs") == [(150, 150)]
    assert rows(fresh_db, "SELECT count(*) FROM runs WHERE status <> 'completed'") == [(0,)]


def test_an_unreadable_event_stops_that_projection_naming_its_position(
    ledger: Ledger, fresh_db: Database
) -> None:
    record_sample_run(ledger)
    agent = ledger.load_agent("demo-trader")
    [bad] = rows(
        fresh_db, "SELECT notification_id FROM ledger_events WHERE topic = 'DecisionLogged'"
    )
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = '\\x7b'::bytea WHERE topic = 'DecisionLogged'"
        )
    views = {v.name: v for v in open_views(ledger)}
    audit = ProjectionRunner(ledger, views["audit"]).start()
    runs = ProjectionRunner(ledger, views["runs"]).start()
    record_runs(ledger, agent, 1)
    assert runs.wait_for(ledger.log.last_committed(), timeout=10)
    deadline = time.monotonic() + 10
    while audit.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert audit.error is not None and f"log position {bad[0]}" in str(audit.error)
    assert audit.position < bad[0]
    assert runs.error is None and runs.running
    runs.stop()


def test_view_survives_nul_and_maximum_size_memory_like_payloads(fresh_db: Database) -> None:
    """(Content in plaintext, ``[ledger] encrypt = false``, to read it with SQL.)"""
    ledger = Ledger(fresh_db.url, encrypt=False)
    agent = ledger.register_agent("odd")
    run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="nul\x00focus"))
    for i, content in enumerate(["x" * 2000, "y" * 2001, "", "nul\x00inside", "\U0001f989"]):
        run.record(
            ev.ToolCallRequested,
            call_id=str(i),
            tool="remember",
            arguments={"content": content, "tags": ["a\x00b"]},
        )
    ledger.append(agent, run)
    for view in open_views(ledger):
        ProjectionRunner(ledger, view).catch_up()
    stored = rows(fresh_db, "SELECT arguments->>'content' FROM audit_tool_calls ORDER BY call_id")
    assert [len(c) for (c,) in stored] == [2000, 2001, 0, 10, 1]
    assert stored[3] == ("nul\ufffdinside",)
    assert rows(fresh_db, "SELECT focus FROM runs") == [("nul\ufffdfocus",)]
    ledger.close()


def test_follow_projection_yields_what_the_view_absorbed(ledger: Ledger) -> None:
    agent = ledger.register_agent("followed")
    view = RunsView(ledger)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    got: list[ev.LedgerEvent] = []

    def consume() -> None:
        for logged in follow_projection(ledger, view):
            got.append(logged.event)
            if sum(isinstance(e, ev.RunCompleted) for e in got) == 3:
                return

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    record_runs(ledger, agent, 3)
    consumer.join(timeout=15)
    runner.stop()
    assert not consumer.is_alive()
    assert sum(isinstance(e, ev.RunStarted) for e in got) == 3
    assert len(got) == 3 * 6  # RunStarted, 2 x (LLMResponded, ToolCallRequested), RunCompleted
    assert all(type(e) in RunsView.events for e in got)


def test_example_cost_job_prints_live_totals(ledger: Ledger, fresh_db: Database) -> None:
    import subprocess
    import sys
    from pathlib import Path

    agent = ledger.register_agent("spender")
    record_runs(ledger, agent, 2)
    view = RunsView(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    script = Path(__file__).parents[2] / "examples" / "cost_per_agent_hour.py"
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
    }
    job = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    expected = "│ 2    │ 40     │ 0.004000 │"  # 2 runs x 2 LLM calls x (10 tokens, $0.001)
    seen: list[str] = []
    reader = threading.Thread(
        target=lambda: seen.extend(iter(job.stdout.readline, "")) if job.stdout else None,
        daemon=True,
    )
    reader.start()
    deadline = time.monotonic() + 60
    try:
        while not any(expected in line for line in seen) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        job.terminate()
        job.wait(timeout=10)
    output = "".join(seen)
    assert "spender" in output
    assert expected in output


def test_schedules_view_tracks_next_fire_last_outcome_and_activity(
    ledger: Ledger, fresh_db: Database
) -> None:
    from datetime import timedelta

    agent = ledger.register_agent("planner")
    once = agent.record(
        ev.ScheduleRequested,
        schedule_id="s-once",
        kind="once",
        focus="check entry opportunities",
        delay_seconds=2,
    )
    cron = agent.record(
        ev.ScheduleRequested,
        schedule_id="s-cron",
        kind="cron",
        focus="hourly review",
        cron="0 * * * *",
    )
    agent.record(
        ev.ScheduleRequested, schedule_id="s-gone", kind="once", focus="never", delay_seconds=60
    )
    agent.record(ev.ScheduleRegistered, schedule_id="s-cron", backend="builtin", backend_id="b-1")
    ledger.append(agent)
    view = SchedulesView(ledger)
    view.create_table()
    runner = ProjectionRunner(ledger, view)
    runner.catch_up()
    expected_cron = cron.timestamp.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    assert rows(
        fresh_db,
        "SELECT schedule_id, agent_id, status, next_fire_at, backend_id"
        " FROM schedules ORDER BY schedule_id",
    ) == [
        ("s-cron", "planner", "registered", expected_cron, "b-1"),
        (
            "s-gone",
            "planner",
            "requested",
            rows(fresh_db, "SELECT next_fire_at FROM schedules WHERE schedule_id='s-gone'")[0][0],
            None,
        ),
        ("s-once", "planner", "requested", once.timestamp + timedelta(seconds=2), None),
    ]
    agent.record(
        ev.TimerFired, schedule_id="s-once", fire_time=once.timestamp + timedelta(seconds=2)
    )
    agent.record(ev.TimerFired, schedule_id="s-cron", fire_time=expected_cron)
    agent.record(ev.ScheduleCancelled, schedule_id="s-gone", reason="no longer needed")
    ledger.append(agent)
    runner.catch_up()
    active = rows(
        fresh_db,
        "SELECT schedule_id, next_fire_at, last_outcome, fires FROM schedules"
        " WHERE status IN ('requested', 'registered')",
    )
    assert active == [("s-cron", expected_cron + timedelta(hours=1), "fired", 1)]
    assert rows(
        fresh_db,
        "SELECT schedule_id, status FROM schedules WHERE status NOT IN"
        " ('requested', 'registered') ORDER BY 1",
    ) == [("s-gone", "cancelled"), ("s-once", "completed")]


def test_async_log_feed_resumes_from_the_last_position_seen(ledger: Ledger) -> None:
    import asyncio

    from projections.feed import afollow_log

    agent = ledger.register_agent("async")
    record_runs(ledger, agent, 1)
    head = ledger.log.last_committed()

    async def take(after: int, count: int) -> list[int]:
        positions: list[int] = []
        async for logged in afollow_log(ledger, after=after):
            positions.append(logged.position)
            if len(positions) == count:
                break
        return positions

    first = asyncio.run(take(0, 3))
    assert first == [1, 2, 3]
    resumed = asyncio.run(take(first[-1], head - 3))
    assert resumed == list(range(4, head + 1))


def test_the_stoppable_log_feed_filters_by_type_reaches_the_head_and_stops_when_told(
    ledger: Ledger,
) -> None:
    agent = ledger.register_agent("stoppable")
    record_runs(ledger, agent, 1)
    stop = threading.Event()
    batches: list[LogBatch] = []

    def consume() -> None:
        batches.extend(follow_log_until(ledger, stop, types=[ev.RunStarted]))

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    wait_for(lambda: batches and batches[-1].position == ledger.log.head(), "the first run")
    record_runs(ledger, agent, 1)  # a wake-up: the feed was idle, waiting
    head = ledger.log.last_committed()
    wait_for(lambda: batches[-1].position == head, "the second run")
    stop.set()
    consumer.join(timeout=5)

    assert not consumer.is_alive()  # stopped while idle, within its wake-up interval
    started = [logged for batch in batches for logged in batch.events]
    assert [type(logged.event) for logged in started] == [ev.RunStarted, ev.RunStarted]
