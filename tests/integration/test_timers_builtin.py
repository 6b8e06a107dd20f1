"""The timer service with the built-in Postgres backend, on the real ledger.

The worker takes its clock as a parameter, so fires minutes apart are tested without waiting;
everything else (rows, leases, ledger, runs) is real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.database import Database
from owlclaw.messages import Fire, FireOutcome, Result
from owlclaw.reports.inspection import open_schedules, schedules_of
from owlclaw.timers.fires import SKIPPED
from owlclaw.timers.registrations import TimerRegistrations
from owlclaw.timers.worker import Deliver, RetryPolicy, TimerWorker, deliver_with_retries
from projections import ProjectionRunner
from tests.scripted import agent_events
from tests.timers import delivering, host, schedule

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def timers(ledger: Ledger) -> Iterator[tuple[TimerRegistrations, ProjectionRunner]]:
    view = TimerRegistrations(ledger)
    view.create_table()
    yield view, ProjectionRunner(ledger, view)


def fired_runs(ledger: Ledger, agent_id: str) -> list[ev.RunQueued]:
    """The runs fires started, as the agent accepted them (durable from then on)."""
    return [
        e
        for e in agent_events(ledger, agent_id)
        if isinstance(e, ev.RunQueued) and e.trigger.startswith("schedule_")
    ]


def test_schedule_once_fires_a_run_with_its_focus(
    ledger: Ledger, timers: tuple[TimerRegistrations, ProjectionRunner]
) -> None:
    view, runner = timers
    owner = schedule(
        ledger, "trader", "schedule_once", delay_seconds=300, focus="check entry opportunities"
    )
    runner.catch_up()
    clock = Clock()

    def tick(deliver: Deliver) -> Awaitable[int]:
        return TimerWorker(view, deliver, clock=clock).tick()

    assert delivering(ledger, tick) == 0  # not due yet
    [requested] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.ScheduleRequested)]
    assert requested.fire_at is not None
    clock.now = requested.fire_at + timedelta(milliseconds=100)
    assert delivering(ledger, tick) == 1
    assert delivering(ledger, tick) == 0  # a one-off fires once
    [fired] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.TimerFired)]
    [run] = fired_runs(ledger, "trader")
    assert fired.fire_time == requested.fire_at and fired.run_id == run.run_id
    assert (run.trigger, run.focus) == ("schedule_once", "check entry opportunities")
    assert run.context["scheduled_by_run_id"] == owner
    registered = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.ScheduleRegistered)]
    assert [(r.backend, r.backend_id) for r in registered] == [("builtin", requested.schedule_id)]
    assert requested.schedule_id not in ledger.load_agent("trader").state.schedules


def test_cron_fires_at_consecutive_minutes(
    ledger: Ledger, timers: tuple[TimerRegistrations, ProjectionRunner]
) -> None:
    view, runner = timers
    schedule(ledger, "watcher", "schedule_cron", cron_expression="* * * * *", focus="watch")
    runner.catch_up()
    clock = Clock()
    first = clock.now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for minute in range(2):
        clock.now = first + timedelta(minutes=minute, milliseconds=50)
        assert delivering(ledger, lambda d: TimerWorker(view, d, clock=clock).tick()) == 1
    fires = [e.fire_time for e in agent_events(ledger, "watcher") if isinstance(e, ev.TimerFired)]
    assert fires == [first, first + timedelta(minutes=1)]
    assert len(fired_runs(ledger, "watcher")) == 2


def test_cancelled_schedule_never_starts_a_run(
    ledger: Ledger, timers: tuple[TimerRegistrations, ProjectionRunner]
) -> None:
    view, runner = timers
    schedule(ledger, "canceller", "schedule_once", delay_seconds=60, focus="later")
    [requested] = [
        e for e in agent_events(ledger, "canceller") if isinstance(e, ev.ScheduleRequested)
    ]
    schedule(ledger, "canceller", "cancel_schedule", schedule_id=requested.schedule_id)
    runner.catch_up()
    clock = Clock()
    clock.now += timedelta(minutes=5)
    assert delivering(ledger, lambda d: TimerWorker(view, d, clock=clock).tick()) == 0
    # a backend that fires anyway (Hatchet may) is refused by the agent itself
    late = Fire(
        agent_id="canceller",
        schedule_id=requested.schedule_id,
        fire_time=requested.fire_at or clock.now,
    )
    outcome = delivering(ledger, lambda deliver: deliver(late))
    assert (outcome.kind, outcome.reason, outcome.run_id) == (
        "duplicate",
        "the schedule was cancelled",
        None,
    )
    assert fired_runs(ledger, "canceller") == []


def test_duplicate_delivery_from_two_processes_starts_exactly_one_run(
    ledger: Ledger, timers: tuple[TimerRegistrations, ProjectionRunner]
) -> None:
    schedule(ledger, "twice", "schedule_once", delay_seconds=30, focus="once only")
    [requested] = [e for e in agent_events(ledger, "twice") if isinstance(e, ev.ScheduleRequested)]
    fire = Fire(
        agent_id="twice",
        schedule_id=requested.schedule_id,
        fire_time=requested.fire_at or datetime.now(UTC),
    )

    async def both() -> None:
        first, second = host(ledger, "act"), host(ledger, "act")  # two independent writers
        outcomes: list[tuple[AgentHost, FireOutcome]] = []

        def recording(agents: AgentHost) -> Deliver:
            async def deliver(fire: Fire) -> FireOutcome:
                outcomes.append((agents, await agents.ask(fire)))
                return outcomes[-1][1]

            return deliver

        policy = RetryPolicy(max_retries=3, backoff_s=0.01)
        await asyncio.gather(
            deliver_with_retries(recording(first), fire, policy),
            deliver_with_retries(recording(second), fire, policy),
        )
        assert sorted(o.kind for _, o in outcomes) == ["duplicate", "fire"]
        [(winner, outcome)] = [(h, o) for h, o in outcomes if o.run_id]
        assert outcome.run_id is not None
        await winner.ask(Result(agent_id="twice", run_id=outcome.run_id))
        await first.close()
        await second.close()

    asyncio.run(both())
    events = agent_events(ledger, "twice")
    assert sum(isinstance(e, ev.TimerFired) for e in events) == 1
    assert sum(isinstance(e, ev.TimerDeduplicated) for e in events) == 1
    assert len(fired_runs(ledger, "twice")) == 1


@pytest.mark.parametrize(
    ("policy", "fired", "missed"),
    [
        ("all", 5, [(3, "beyond the catch-up window of 3000 s")]),
        ("one", 1, [(3, "beyond the catch-up window of 3000 s"), (4, "coalesced into")]),
        ("skip", 0, [(8, SKIPPED)]),
    ],
)
def test_each_on_missed_policy_after_the_service_was_down(
    ledger: Ledger,
    timers: tuple[TimerRegistrations, ProjectionRunner],
    policy: str,
    fired: int,
    missed: list[tuple[int, str]],
) -> None:
    """75 minutes down under a cron every 10 minutes: 8 fires were due, 3 of them beyond the
    (50-minute) catch-up window. Each policy fires what it says, records the rest as missed
    (a run of misses with one reason is one TimerMissed with their count), and the schedule
    then fires on time again."""
    view, runner = timers
    agent_id = f"late-{policy}"
    schedule(
        ledger,
        agent_id,
        "schedule_cron",
        cron_expression="*/10 * * * *",
        focus="poll",
        on_missed=policy,
    )
    runner.catch_up()
    with view.transaction(commit=True) as curs:  # a window shorter than the downtime
        curs.execute(view.sql("UPDATE {timers} SET catch_up_window_s = 3000"))
    with view.transaction(commit=False) as curs:
        [row] = curs.execute(view.sql("SELECT next_fire_at, misfire FROM {timers}")).fetchall()
    assert row["misfire"] == policy
    clock = Clock()
    clock.now = row["next_fire_at"] + timedelta(minutes=75, seconds=1)  # 8 fires were due

    def tick(deliver: Deliver) -> Awaitable[int]:
        return TimerWorker(view, deliver, clock=clock).tick()

    assert delivering(ledger, tick) == 1
    events = agent_events(ledger, agent_id)
    assert sum(isinstance(e, ev.TimerFired) for e in events) == fired
    records = [e for e in events if isinstance(e, ev.TimerMissed)]
    assert len(records) == len(missed)
    assert [
        (e.occurrences, e.reason[: len(r)]) for e, (_, r) in zip(records, missed, strict=True)
    ] == missed
    assert records[0].first_fire_time == row["next_fire_at"]
    assert len(fired_runs(ledger, agent_id)) == fired
    listing = schedules_of(ledger, open_schedules(ledger), agent_id, every=True)
    [shown] = listing.rows  # what the CLI and the console show
    occurrences = sum(n for n, _ in missed)
    assert (shown["fires"], shown["misses"], shown["on_missed"]) == (fired, occurrences, policy)
    assert fired + occurrences == 8  # every due fire accounted for
    clock.now = row["next_fire_at"] + timedelta(minutes=80)  # the next one, on time
    assert delivering(ledger, tick) == 1
    assert len(fired_runs(ledger, agent_id)) == fired + 1


@settings(max_examples=100, deadline=None)
@given(failures=st.integers(min_value=0, max_value=6), retries=st.integers(0, 4))
def test_property_17_failed_deliveries_are_retried_up_to_the_limit(
    failures: int, retries: int
) -> None:
    """Feature: agent-runtime, Property 17 — a failed timer task is retried by its policy, never
    more than the configured maximum (Hatchet runs the same policy as the task's ``retries``)."""
    attempts: list[int] = []

    async def flaky(fire: Fire) -> FireOutcome:
        attempts.append(1)
        if len(attempts) <= failures:
            raise ConnectionError("ledger unavailable")
        return FireOutcome("fire")

    fire = Fire(agent_id="a", schedule_id="s", fire_time=datetime.now(UTC))
    policy = RetryPolicy(max_retries=retries, backoff_s=0.0)
    if failures <= retries:
        assert asyncio.run(deliver_with_retries(flaky, fire, policy)) == failures + 1
    else:
        with pytest.raises(ConnectionError):
            asyncio.run(deliver_with_retries(flaky, fire, policy))
    assert len(attempts) == min(failures, retries) + 1


def test_timer_rows_survive_and_are_not_doubled_by_a_replayed_projection(
    ledger: Ledger, timers: tuple[TimerRegistrations, ProjectionRunner]
) -> None:
    view, runner = timers
    for i in range(3):
        schedule(ledger, "many", "schedule_once", delay_seconds=100 + i, focus=f"f{i}")
    runner.catch_up()
    again = ProjectionRunner(ledger, TimerRegistrations(ledger))
    assert again.position == runner.position  # a second service resumes from the tracking
    again.catch_up()
    with view.transaction(commit=False) as curs:
        rows = curs.execute(view.sql("SELECT focus FROM {timers}")).fetchall()
    assert not {r["focus"] for r in rows} & {"f0", "f1", "f2"}  # kept sealed, as in the ledger
    assert sorted(ledger.sealer.open(r["focus"]) for r in rows) == ["f0", "f1", "f2"]


def test_cli_schedules_lists_active_schedules_with_next_fire(
    fresh_db: Database, ledger: Ledger, tmp_path: Any
) -> None:
    import json

    from tests.cli import owlclaw_on as owlclaw

    schedule(ledger, "listed", "schedule_cron", cron_expression="0 9 * * 1-5", focus="open")
    schedule(ledger, "listed", "schedule_once", delay_seconds=600, focus="later")
    shown = owlclaw(fresh_db, "schedules", "listed", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = {r["focus"]: r for r in json.loads(shown.stdout)}
    assert set(rows) == {"open", "later"}
    assert rows["open"]["cron"] == "0 9 * * 1-5" and rows["open"]["next_fire_at"].endswith(
        "09:00:00Z"
    )
    missing = owlclaw(fresh_db, "schedules", "nobody", cwd=tmp_path)
    assert missing.returncode == 3 and "nobody" in missing.stderr


def test_killed_timer_service_loses_nothing_and_doubles_nothing(
    fresh_db: Database, ledger: Ledger, tmp_path: Any
) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "act.json").write_text(json.dumps({"steps": [{"content": "checked"}]}))
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
        "OWLCLAW_MODELS": "scripted/act",
        "OWLCLAW_SCRIPTS_DIR": str(tmp_path),
        "OWLCLAW_TIMER_GRACE_S": "1",
        # A slow machine can put the kill inside a claim: its lease then has to expire first.
        "OWLCLAW_TIMER_LEASE_S": "3",
        "OWLCLAW_PLACEMENT": "local",  # agents in the service process: no Ray needed here
    }

    def serve() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "owlclaw", "timers", "serve"],
            env=env,
            cwd=tmp_path,
            stdout=(tmp_path / "serve.log").open("ab"),
            stderr=subprocess.STDOUT,
        )

    def fired(agent_id: str) -> list[ev.LedgerEvent]:
        return [e for e in agent_events(ledger, agent_id) if isinstance(e, ev.TimerFired)]

    def wait_for(condition: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.2)
        return bool(condition())

    def plan(agent_id: str, fire_at: datetime) -> None:
        agent = ledger.register_agent(agent_id)
        agent.record(
            ev.ScheduleRequested,
            schedule_id=f"sch_{agent_id}",
            kind="once",
            focus=agent_id,
            agent_id=agent_id,
            delay_seconds=max(1, round((fire_at - datetime.now(UTC)).total_seconds())),
            fire_at=fire_at,
            on_missed="skip" if agent_id == "skipped" else "one",
        )
        ledger.append(agent)

    plans = ("before", "during", "skipped")
    service = serve()
    plan("before", datetime.now(UTC) + timedelta(seconds=8))
    assert wait_for(lambda: bool(fired("before")), 60), (tmp_path / "serve.log").read_text()
    service.send_signal(signal.SIGKILL)  # between fires: no clean shutdown
    service.wait()
    # Planned once the service is dead, so they fall due while nothing serves them, however
    # long the first service took to start; the wait is on the clock, not on the machine.
    due = datetime.now(UTC) + timedelta(seconds=2)
    plan("during", due)
    plan("skipped", due)
    time.sleep(max(0.0, (due + timedelta(seconds=3) - datetime.now(UTC)).total_seconds()))
    service = serve()  # both remaining fires are now late
    try:
        assert wait_for(lambda: bool(fired("during")), 60), (tmp_path / "serve.log").read_text()
        assert wait_for(
            lambda: any(isinstance(e, ev.TimerMissed) for e in agent_events(ledger, "skipped")), 30
        )
    finally:
        service.terminate()
        service.wait(timeout=30)
    assert [len(fired(a)) for a in plans] == [1, 1, 0]  # nothing lost, nothing doubled
    [missed] = [e for e in agent_events(ledger, "skipped") if isinstance(e, ev.TimerMissed)]
    assert missed.reason.startswith("skipped")
    assert [len(fired_runs(ledger, a)) for a in plans] == [1, 1, 0]


def timer_rows(view: TimerRegistrations) -> list[dict[str, Any]]:
    with view.transaction(commit=False) as curs:
        return list(curs.execute(view.sql("SELECT * FROM {timers}")).fetchall())


def test_a_worker_fires_only_the_agents_it_serves(ledger: Ledger) -> None:
    """``owlclaw run APP`` fires its app's timers only: another agent's stay due, untouched, for
    the server that serves it."""
    view = TimerRegistrations(ledger, served=["trader"])
    view.create_table()
    schedule(ledger, "trader", "schedule_once", delay_seconds=60, focus="mine")
    schedule(ledger, "stranger", "schedule_once", delay_seconds=60, focus="not mine")
    ProjectionRunner(ledger, view).catch_up()
    clock = Clock()
    clock.now += timedelta(minutes=5)

    def tick(view: TimerRegistrations) -> Callable[[Deliver], Awaitable[int]]:
        return lambda deliver: TimerWorker(view, deliver, clock=clock).tick()

    assert delivering(ledger, tick(view)) == 1
    assert [e.focus for e in fired_runs(ledger, "trader")] == ["mine"]
    assert fired_runs(ledger, "stranger") == []
    assert delivering(ledger, tick(view)) == 0  # the stranger's timer is never claimed here
    theirs = TimerRegistrations(ledger, served=["stranger"])
    assert delivering(ledger, tick(theirs)) == 1
    assert [e.focus for e in fired_runs(ledger, "stranger")] == ["not mine"]


class HeldElsewhere:
    """An external backend (as Hatchet is) that holds every timer; records its cancels."""

    name = "engine"

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def holds(self, row: dict[str, Any], now: datetime) -> bool:
        return True

    def register(self, row: dict[str, Any]) -> str:
        return f"engine-{row['schedule_id']}"

    def cancel(self, backend_id: str, kind: str) -> None:
        self.cancelled.append(backend_id)


def test_an_engine_fire_of_an_agent_not_served_here_is_handed_back(ledger: Ledger) -> None:
    """A server's engine worker that receives another agent's fire gives it back to the built-in
    rows, due at that fire, and removes it from the engine: the agent's own server fires it."""
    engine = HeldElsewhere()
    registering = TimerRegistrations(ledger, backend=engine)
    registering.create_table()
    schedule(ledger, "stranger", "schedule_cron", cron_expression="*/5 * * * *", focus="sweep")
    ProjectionRunner(ledger, registering).catch_up()
    [row] = timer_rows(registering)
    assert (row["backend"], row["backend_id"]) == ("engine", f"engine-{row['schedule_id']}")
    fire_time = row["next_fire_at"]
    fire = Fire(agent_id="stranger", schedule_id=row["schedule_id"], fire_time=fire_time)

    here = TimerRegistrations(ledger, backend=engine, served=["trader"])
    assert TimerRegistrations(ledger, backend=engine).hand_back(fire) is False
    assert here.hand_back(fire) is True
    assert here.hand_back(fire) is True  # a second delivery of the fire: nothing more to do
    assert engine.cancelled == [f"engine-{row['schedule_id']}"]
    [moved] = timer_rows(here)
    assert (moved["backend"], moved["next_fire_at"]) == ("builtin", fire_time)
    registered = [
        e for e in agent_events(ledger, "stranger") if isinstance(e, ev.ScheduleRegistered)
    ]
    assert registered[-1].backend == "builtin"
    clock = Clock()
    clock.now = fire_time + timedelta(seconds=1)
    theirs = TimerRegistrations(ledger, served=["stranger"])
    handled = delivering(ledger, lambda d: TimerWorker(theirs, d, clock=clock).tick())
    assert handled == 1
    assert [e.focus for e in fired_runs(ledger, "stranger")] == ["sweep"]
