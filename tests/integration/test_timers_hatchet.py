"""The timer service against the real Hatchet engine (built from the hatchet module, started on
our PostgreSQL) with its worker as a separate process, as in production."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.child_process import stop
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.timers.fires import SKIPPED
from owlclaw.timers.hatchet_backend import EARLY, LEAD, TASK, HatchetBackend, fire_of
from owlclaw.timers.hatchet_engine import HatchetEngine, HatchetUnavailable, start_engine
from owlclaw.timers.registrations import TimerRegistrations
from owlclaw.timers.worker import Deliver, TimerWorker
from projections import ProjectionRunner
from tests.components import missing_component
from tests.timers import delivering

# One xdist worker runs the module, so its tests share one engine (each plans its own schedules).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("hatchet")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine(
    pg_server: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HatchetEngine]:
    bin_dir = Path(os.environ.get("OWLCLAW_HATCHET_BIN", ROOT / ".owlclaw" / "bin"))
    name = f"hatchet_{uuid.uuid4().hex[:8]}"
    db = pg_server.create_database(name)
    try:
        started = start_engine(db.url, tmp_path_factory.mktemp("hatchet"), bin_dir)
    except HatchetUnavailable as e:
        pg_server.drop_database(name)
        missing_component("the Hatchet engine", e)
        raise
    yield started
    for process in (started.engine, started.api):  # its database goes: no clean stop (5 s) needed
        process.kill()
        process.wait()
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def ledger_db(pg_server: Database) -> Iterator[Database]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def hatchet(engine: HatchetEngine) -> Iterator[Any]:
    saved = {k: os.environ.get(k) for k in engine.client_env}
    os.environ.update(engine.client_env)
    from hatchet_sdk import Hatchet

    yield Hatchet()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def worker(
    hatchet: Any,
    engine: HatchetEngine,
    ledger_db: Database,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[subprocess.Popen[bytes]]:
    scripts = tmp_path_factory.mktemp("scripts")
    (scripts / "act.json").write_text(json.dumps({"steps": [{"content": "checked"}]}))
    env = {
        **os.environ,
        **engine.client_env,
        "OWLCLAW_DATABASE_URL": ledger_db.url,
        "OWLCLAW_DATABASE_NAME": str(ledger_db.params["dbname"]),
        "OWLCLAW_MODELS": "scripted/act",
        "OWLCLAW_SCRIPTS_DIR": str(scripts),
        "OWLCLAW_PLACEMENT": "local",  # agents in the service process: no Ray needed here
    }
    log = (scripts / "worker.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "timers", "hatchet-worker"],
        env=env,
        cwd=scripts,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    from hatchet_sdk import Hatchet

    client = Hatchet()
    listening = wait_until(lambda: process.poll() is None and listens(client), 60)
    assert listening, (scripts / "worker.log").read_text()[-3000:]
    yield process
    stop(process, 30)


def listens(client: Any) -> bool:
    """The worker's task is registered and its listener too (seconds later): a test may restart
    the engine once it listens. The engine has a database of its own: its only worker is ours."""
    if not client.workflows.list(workflow_name=TASK).rows:
        return False
    return any(w.status == "ACTIVE" for w in client.workers.list().rows or [])


@pytest.fixture
def ledger(ledger_db: Database) -> Iterator[Ledger]:
    """A ledger on the worker's database: the one its fires are delivered to."""
    with Ledger(ledger_db.url) as led:
        yield led


@pytest.fixture
def own_ledger(fresh_db: Database) -> Iterator[Ledger]:
    """A ledger of the test's own, for a test that works on every timer row (adopting them,
    firing the due ones): the other tests' rows are not in its database."""
    with Ledger(fresh_db.url) as led:
        yield led


@pytest.fixture
def minute_cron(ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]) -> None:
    """A cron fired every minute through the engine (its test waits up to two minutes)."""
    plan(ledger, "h-cron", "schedule_cron", cron_expression="* * * * *", focus="watch")
    register(ledger, hatchet)


def plan(ledger: Ledger, agent_id: str, tool: str, **arguments: Any) -> None:
    register_script("plan", [{"tool_calls": [{"name": tool, "arguments": arguments}]}])
    runtime = AgentRuntime(ledger, agent_id, models=["scripted/plan"])
    asyncio.run(runtime.run("webhook"))
    runtime.close()


AHEAD_S = int(LEAD.total_seconds()) + 7
"""How far ahead a one-off is planned for Hatchet to hold it: LEAD and 7 s for planning and
registering it on a loaded machine (LEAD + 2 s left it 2 s)."""


def register(ledger: Ledger, hatchet: Any) -> TimerRegistrations:
    view = TimerRegistrations(ledger, backend=HatchetBackend(hatchet))
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    return view


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


def events_of(ledger: Ledger, agent_id: str, kind: type[ev.LedgerEvent]) -> list[Any]:
    return [e for e in ledger.stream(ledger.load_agent(agent_id).id) if isinstance(e, kind)]


def all_sealed(ledger: Ledger, agent_id: str) -> bool:
    """Every run queued on the agent has ended (its RunSealed is on the agent stream)."""
    queued = {e.run_id for e in events_of(ledger, agent_id, ev.RunQueued)}
    return queued <= {e.run_id for e in events_of(ledger, agent_id, ev.RunSealed)}


def test_a_fire_due_right_after_an_engine_restart_arrives_on_time(
    ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes], engine: HatchetEngine
) -> None:
    """hatchet-lite exited on SIGTERM before its engine removed its scheduler partition: after a
    restart on the same database the tenant stayed on the dead partition and fires came 22-31 s
    late, until Hatchet's one-minute rebalance. The engine now cleans up before it exits."""
    engine.restart()
    plan(ledger, "h-restart", "schedule_once", delay_seconds=AHEAD_S, focus="after the restart")
    register(ledger, hatchet)
    assert [r.backend for r in events_of(ledger, "h-restart", ev.ScheduleRegistered)] == ["hatchet"]
    assert wait_until(lambda: bool(events_of(ledger, "h-restart", ev.TimerFired)), 60)
    [fired] = events_of(ledger, "h-restart", ev.TimerFired)
    assert fired.timestamp - fired.fire_time < timedelta(seconds=10)  # not the 22-31 s


def test_schedule_once_fires_through_hatchet(
    ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]
) -> None:
    plan(
        ledger,
        "h-trader",
        "schedule_once",
        delay_seconds=AHEAD_S,
        focus="check entry opportunities",
    )
    register(ledger, hatchet)
    [registered] = events_of(ledger, "h-trader", ev.ScheduleRegistered)
    assert registered.backend == "hatchet"
    [requested] = events_of(ledger, "h-trader", ev.ScheduleRequested)
    # The engine triggers it EARLY before its fire time: its own latency is spent before the fire.
    held = hatchet.scheduled.get(registered.backend_id)
    assert abs(held.trigger_at - (requested.fire_at - EARLY)) < timedelta(milliseconds=1)
    assert wait_until(lambda: bool(events_of(ledger, "h-trader", ev.TimerFired)), 60)
    [fired] = events_of(ledger, "h-trader", ev.TimerFired)
    assert fired.fire_time == requested.fire_at
    assert fired.timestamp >= fired.fire_time  # the task waited for the fire time
    assert wait_until(lambda: bool(ledger.stream(fired.run_id)), 30)  # the run, from the mailbox
    [run] = [e for e in ledger.stream(fired.run_id) if isinstance(e, ev.RunStarted)]
    assert (run.trigger, run.focus) == ("schedule_once", "check entry opportunities")


def test_cancelled_before_the_fire_never_runs(
    ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]
) -> None:
    plan(ledger, "h-cancel", "schedule_once", delay_seconds=AHEAD_S, focus="never")
    register(ledger, hatchet)
    # Held by the engine: a one-off due within the lead stays on the built-in fast path, which
    # no worker serves in this module, so it could not fire whatever the cancel did.
    [registered] = events_of(ledger, "h-cancel", ev.ScheduleRegistered)
    assert registered.backend == "hatchet"
    [requested] = events_of(ledger, "h-cancel", ev.ScheduleRequested)
    plan(ledger, "h-cancel", "cancel_schedule", schedule_id=requested.schedule_id)
    register(ledger, hatchet)
    held = hatchet.scheduled.list(limit=1000).rows or []
    assert registered.backend_id not in {s.metadata.id for s in held}  # the engine let it go
    assert requested.fire_at is not None
    time.sleep(max(0.0, requested.fire_at.timestamp() + 5 - time.time()))
    assert events_of(ledger, "h-cancel", ev.TimerFired) == []
    assert len(ledger.list_runs("h-cancel")) == 2  # the planning run and the cancelling run


def test_a_duplicate_delivery_starts_exactly_one_run(
    ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]
) -> None:
    plan(ledger, "h-dup", "schedule_once", delay_seconds=600, focus="only once")
    [requested] = events_of(ledger, "h-dup", ev.ScheduleRequested)
    task_input = {
        "agent_id": "h-dup",
        "schedule_id": requested.schedule_id,
        "fire_time": requested.fire_at.isoformat(),
        "misfire": "catch_up",
        "catch_up_window_s": 3600,
    }
    for _ in range(2):  # what a double-firing engine does
        hatchet.runs.create("owlclaw-timer-fire", input=task_input)
    assert wait_until(lambda: bool(events_of(ledger, "h-dup", ev.TimerDeduplicated)), 60)
    assert len(events_of(ledger, "h-dup", ev.TimerFired)) == 1
    assert len(ledger.list_runs("h-dup")) == 2  # the planning run and one fired run


def test_a_schedule_made_while_hatchet_is_down_is_kept_and_moved_once_it_is_back(
    ledger: Ledger,
    hatchet: Any,
    worker: subprocess.Popen[bytes],
    engine: HatchetEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    from hatchet_sdk import Hatchet

    with socket.socket() as s:  # a port nothing listens on: the engine "went away"
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with monkeypatch.context() as down:
        down.setenv("HATCHET_CLIENT_SERVER_URL", f"http://127.0.0.1:{closed}")
        down.setenv("HATCHET_CLIENT_HOST_PORT", f"127.0.0.1:{closed}")
        unreachable = Hatchet()
    plan(ledger, "h-down", "schedule_once", delay_seconds=AHEAD_S, focus="kept")  # held after LEAD
    view = register(ledger, unreachable)
    assert [r.backend for r in events_of(ledger, "h-down", ev.ScheduleRegistered)] == ["builtin"]
    back = TimerRegistrations(ledger, backend=HatchetBackend(hatchet))
    assert back.adopt() >= 1  # what `owlclaw timers serve` does at start (all kept timers)
    with view.transaction(commit=False) as curs:
        [row] = curs.execute(
            view.sql("SELECT backend FROM {timers} WHERE agent_id = 'h-down'")
        ).fetchall()
    assert row["backend"] == "hatchet"
    registered = [r.backend for r in events_of(ledger, "h-down", ev.ScheduleRegistered)]
    assert registered == ["builtin", "hatchet"]
    assert wait_until(lambda: bool(events_of(ledger, "h-down", ev.TimerFired)), 60)


def test_a_fire_due_sooner_than_the_lead_goes_on_the_builtin_fast_path(
    own_ledger: Ledger, hatchet: Any
) -> None:
    register_script("act", [{"content": "checked"}])
    plan(own_ledger, "h-soon", "schedule_once", delay_seconds=2, focus="soon")
    view = register(own_ledger, hatchet)
    assert [r.backend for r in events_of(own_ledger, "h-soon", ev.ScheduleRegistered)] == [
        "builtin"
    ]

    async def fire_due(deliver: Deliver) -> None:
        worker = TimerWorker(view, deliver)
        while not await worker.tick():  # the worker's own poll, until the timer is due
            await asyncio.sleep(TimerWorker.POLL_S)

    delivering(own_ledger, fire_due)
    [fired] = events_of(own_ledger, "h-soon", ev.TimerFired)
    [requested] = events_of(own_ledger, "h-soon", ev.ScheduleRequested)
    assert fired.fire_time == requested.fire_at


def test_switching_from_hatchet_to_builtin_keeps_the_schedule(
    own_ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]
) -> None:
    from owlclaw.timers.registrations import BuiltinBackend

    plan(own_ledger, "h-switch", "schedule_cron", cron_expression="0 0 1 1 *", focus="yearly")
    register(own_ledger, hatchet)
    builtin = TimerRegistrations(own_ledger, backend=BuiltinBackend())
    assert builtin.adopt() >= 1
    with builtin.transaction(commit=False) as curs:
        [row] = curs.execute(
            builtin.sql("SELECT backend, next_fire_at FROM {timers} WHERE agent_id = 'h-switch'")
        ).fetchall()
    assert row["backend"] == "builtin" and (row["next_fire_at"].month, row["next_fire_at"].day) == (
        1,
        1,
    )


def test_a_late_hatchet_fire_follows_the_misfire_policy() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    task = {"agent_id": "a", "schedule_id": "s", "misfire": "skip", "catch_up_window_s": 60}
    late = fire_of({**task, "fire_time": (now - timedelta(minutes=5)).isoformat()}, {}, now)
    assert late.missed is not None and late.missed.startswith("skipped")
    cron = fire_of(
        {**task, "misfire": "coalesce"}, {"hatchet__cron_scheduled_at": "2026-01-01T00:00:00Z"}, now
    )
    assert cron.fire_time == datetime(2026, 1, 1, tzinfo=UTC) and "catch-up window" in (
        cron.missed or ""
    )


def test_late_cron_fires_from_the_engine_follow_on_missed(
    ledger: Ledger, hatchet: Any, worker: subprocess.Popen[bytes]
) -> None:
    """The worker was down for a cron's last three fires: the engine delivers each of them late,
    alone, with the input the cron was registered with. Under on_missed = one the two older are
    recorded as coalesced into the latest, which fires; under skip none fires. The cron fires at
    the three minutes before now, so its next fire is an hour away whatever the clock says."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    due = [now - timedelta(minutes=n) for n in (3, 2, 1)]
    cron = f"{','.join(str(t.minute) for t in sorted(due, key=lambda t: t.minute))} * * * *"
    for policy in ("one", "skip"):
        plan(
            ledger,
            f"h-late-{policy}",
            "schedule_cron",
            cron_expression=cron,
            focus="poll",
            on_missed=policy,
        )
    register(ledger, hatchet)
    for policy in ("one", "skip"):
        agent_id = f"h-late-{policy}"
        [registered] = events_of(ledger, agent_id, ev.ScheduleRegistered)
        assert registered.backend == "hatchet"
        task_input = hatchet.cron.get(registered.backend_id).input
        assert (task_input["on_missed"], task_input["cron"]) == (policy, cron)
        for n, t in enumerate(due, 1):  # as the engine's ticker queued them, oldest first
            hatchet.runs.create(TASK, input={**task_input, "fire_time": t.isoformat()})
            assert wait_until(lambda n=n, a=agent_id: len(judged(ledger, a)) == n, 60)
    fired = events_of(ledger, "h-late-one", ev.TimerFired)
    coalesced = events_of(ledger, "h-late-one", ev.TimerMissed)
    assert [e.fire_time for e in fired] == due[-1:]
    assert [e.fire_time for e in coalesced] == due[:2]
    assert all(e.reason == f"coalesced into the fire at {due[-1].isoformat()}" for e in coalesced)
    skipped = events_of(ledger, "h-late-skip", ev.TimerMissed)
    assert events_of(ledger, "h-late-skip", ev.TimerFired) == []
    assert [(e.fire_time, e.reason) for e in skipped] == [(t, SKIPPED) for t in due]
    assert wait_until(lambda: all_sealed(ledger, "h-late-one"), 60)


def judged(ledger: Ledger, agent_id: str) -> list[Any]:
    """The verdicts the agent recorded on fires delivered to it."""
    return [
        e
        for e in ledger.stream(ledger.load_agent(agent_id).id)
        if isinstance(e, ev.TimerFired | ev.TimerMissed | ev.TimerDeduplicated)
    ]


def test_cron_fires_at_two_consecutive_minutes(
    ledger: Ledger, hatchet: Any, minute_cron: None
) -> None:
    assert wait_until(lambda: len(events_of(ledger, "h-cron", ev.TimerFired)) >= 2, 150)
    first, second = (e.fire_time for e in events_of(ledger, "h-cron", ev.TimerFired)[:2])
    assert first.second == 0 and (second - first).total_seconds() == 60
    # The fires' runs end on the worker's host, whose seals are appended to the agent stream:
    # plan's runtime, a second writer of this agent, waits for them (ci41: a seal conflicted).
    wait_until(lambda: all_sealed(ledger, "h-cron"), 60)
    plan(
        ledger,
        "h-cron",
        "cancel_schedule",
        schedule_id=events_of(ledger, "h-cron", ev.ScheduleRequested)[0].schedule_id,
    )
    register(ledger, hatchet)
