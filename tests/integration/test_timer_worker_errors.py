"""The built-in timer worker on a database error: a failed claim makes ``run`` raise (for the
supervisor) instead of ending silently, and the fire is neither lost nor advanced past nor left
to the lease: an unclaimed row is claimed again; a failed delivery releases its claim, to be
claimed again after a short backoff; a release or an advance that meets the database away is
written once it answers (only a worker stopped meanwhile leaves the row to its lease)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from events import Ledger, LedgerUnavailable
from owlclaw.messages import Fire, FireOutcome
from owlclaw.timers.registrations import TimerRegistrations
from owlclaw.timers.worker import RetryPolicy, TimerWorker

pytestmark = pytest.mark.integration
LEASE = timedelta(minutes=5)


def due_timer(view: TimerRegistrations, fire_at: datetime) -> None:
    with view.transaction(commit=True) as curs:
        curs.execute(
            view.sql(
                "INSERT INTO {timers} (schedule_id, agent_id, kind, focus, next_fire_at, misfire,"
                " catch_up_window_s, backend, backend_id) VALUES ('s-1', 'trader', 'once',"
                " 'check', %s, 'coalesce', 3600, 'builtin', 's-1')"
            ),
            (fire_at,),
        )


def timer_rows(view: TimerRegistrations) -> list[dict[str, Any]]:
    with view.transaction(commit=False) as curs:
        return curs.execute(view.sql("SELECT * FROM {timers}")).fetchall()


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Deliveries:
    """Where the worker delivers: records each fire and stops the worker after it."""

    def __init__(self) -> None:
        self.fires: list[Fire] = []
        self.stop = asyncio.Event()

    async def fire(self, fire: Fire) -> FireOutcome:
        self.fires.append(fire)
        self.stop.set()
        return FireOutcome("fire")

    def serve(self, worker: TimerWorker) -> None:
        """``worker.run`` until the next fire is delivered."""

        async def main() -> None:
            self.stop = asyncio.Event()
            await worker.run(self.stop)

        asyncio.run(main())


def dropped_connection(*_: object) -> None:
    raise psycopg.OperationalError("server closed the connection unexpectedly")


@pytest.fixture
def view(ledger: Ledger) -> TimerRegistrations:
    timers = TimerRegistrations(ledger)
    timers.create_table()
    return timers


def failing(times: int, write: Callable[..., None]) -> Callable[..., None]:
    """``write`` whose first ``times`` calls find the database away."""
    calls = iter(range(times))

    def call(*args: Any) -> None:
        if next(calls, None) is not None:
            dropped_connection()
        write(*args)

    return call


def test_an_advance_that_meets_the_database_away_is_written_once_it_answers(
    view: TimerRegistrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))
    fires: list[Fire] = []

    async def deliver(fire: Fire) -> FireOutcome:
        fires.append(fire)
        return FireOutcome("fire")

    worker = TimerWorker(view, deliver, clock=lambda: now, lease=LEASE)
    monkeypatch.setattr(worker, "_advance", failing(2, worker._advance))
    assert asyncio.run(worker.tick()) == 1  # delivered, then advanced at the third try
    assert len(fires) == 1 and timer_rows(view) == []


def test_a_worker_stopped_while_its_advance_meets_the_database_away_leaves_the_lease(
    view: TimerRegistrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))
    agents = Deliveries()  # stops the worker once the fire is delivered
    stopped = TimerWorker(view, agents.fire, clock=lambda: now, lease=LEASE)
    monkeypatch.setattr(stopped, "_advance", dropped_connection)
    agents.serve(stopped)
    [row] = timer_rows(view)  # delivered, not advanced: still there, leased
    assert row["leased_until"] == now + LEASE

    later = now + LEASE + timedelta(seconds=1)
    worker = TimerWorker(view, agents.fire, clock=lambda: later, lease=LEASE)
    agents.serve(worker)
    first, again = agents.fires
    assert again.key == first.key  # the same fire: the agent deduplicates it
    assert timer_rows(view) == []


def test_a_failed_delivery_releases_the_claim_to_be_claimed_again_soon(
    view: TimerRegistrations,
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))
    refused: list[Fire] = []

    async def unavailable(fire: Fire) -> FireOutcome:
        refused.append(fire)
        raise LedgerUnavailable("cannot look up stream heads: terminating connection")

    no_retries = RetryPolicy(max_retries=0)
    clock = Clock(now)
    worker = TimerWorker(view, unavailable, clock=clock, lease=LEASE, retry=no_retries)
    assert asyncio.run(worker.tick()) == 0
    [row] = timer_rows(view)
    assert row["leased_until"] == now + timedelta(seconds=1)  # not now + LEASE
    assert asyncio.run(worker.tick()) == 0  # not due again yet: nobody claims it
    assert len(refused) == 1

    clock.now = now + timedelta(seconds=1, milliseconds=1)
    assert asyncio.run(worker.tick()) == 0  # the second failure backs off longer
    [row] = timer_rows(view)
    assert row["leased_until"] == clock.now + timedelta(seconds=2) and row["attempts"] == 2

    agents = Deliveries()
    clock.now += timedelta(seconds=2, milliseconds=1)
    assert asyncio.run(TimerWorker(view, agents.fire, clock=clock, lease=LEASE).tick()) == 1
    assert [f.key for f in agents.fires] == [refused[0].key] and timer_rows(view) == []


def test_a_release_that_meets_the_database_away_is_written_once_it_answers(
    view: TimerRegistrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))

    async def unavailable(fire: Fire) -> FireOutcome:
        raise LedgerUnavailable("database unreachable")

    no_retries = RetryPolicy(max_retries=0)
    worker = TimerWorker(view, unavailable, clock=lambda: now, lease=LEASE, retry=no_retries)
    monkeypatch.setattr(worker, "_release", failing(3, worker._release))
    assert asyncio.run(worker.tick()) == 0
    [row] = timer_rows(view)
    assert row["leased_until"] == now + timedelta(seconds=1)


def test_the_backoff_of_a_failing_delivery_is_capped_by_the_lease(view: TimerRegistrations) -> None:
    async def deliver(fire: Fire) -> FireOutcome:
        return FireOutcome("fire")

    worker = TimerWorker(view, deliver, lease=LEASE)
    waits = [worker.redeliver_after(n).total_seconds() for n in (1, 2, 3, 6, 7, 10_000)]
    assert waits == [1, 2, 4, 30, 30, 30]
    assert TimerWorker(view, deliver, lease=timedelta(seconds=3)).redeliver_after(5).seconds == 3


def test_a_failed_claim_is_raised_and_the_row_claimed_by_the_next_run(
    view: TimerRegistrations, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))
    agents = Deliveries()
    failing = TimerWorker(view, agents.fire, clock=lambda: now, lease=LEASE)
    monkeypatch.setattr(failing, "_claim", dropped_connection)
    with pytest.raises(psycopg.OperationalError):
        agents.serve(failing)
    assert agents.fires == []
    [row] = timer_rows(view)
    assert row["leased_until"] is None

    agents.serve(TimerWorker(view, agents.fire, clock=lambda: now, lease=LEASE))
    [fire] = agents.fires
    assert (fire.agent_id, fire.schedule_id) == ("trader", "s-1")
    assert timer_rows(view) == []
