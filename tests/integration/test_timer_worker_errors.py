"""The built-in timer worker on a database error: ``run`` raises (for the supervisor) instead of
ending silently, and the fire is neither lost nor advanced past: an unclaimed row is claimed
again, a delivered row that did not advance is delivered again once its lease expires."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from events import Ledger
from owlclaw.timers.fires import FireOutcome, TimerFire
from owlclaw.timers.service import TimersView
from owlclaw.timers.worker import TimerWorker

pytestmark = pytest.mark.integration
LEASE = timedelta(minutes=5)


def due_timer(view: TimersView, fire_at: datetime) -> None:
    with view.datastore.transaction(commit=True) as curs:
        curs.execute(
            view.sql(
                "INSERT INTO {timers} (schedule_id, agent_id, kind, focus, next_fire_at, misfire,"
                " catch_up_window_s, backend, backend_id) VALUES ('s-1', 'trader', 'once',"
                " 'check', %s, 'coalesce', 3600, 'builtin', 's-1')"
            ),
            (fire_at,),
        )


def timer_rows(view: TimersView) -> list[dict[str, Any]]:
    with view.datastore.transaction(commit=False) as curs:
        return curs.execute(view.sql("SELECT * FROM {timers}")).fetchall()


class Deliveries:
    """Where the worker delivers: records each fire and stops the worker after it."""

    def __init__(self) -> None:
        self.fires: list[TimerFire] = []
        self.stop = asyncio.Event()

    async def fire(self, fire: TimerFire) -> FireOutcome:
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
def view(ledger: Ledger) -> TimersView:
    timers = TimersView(ledger.datastore, ledger=ledger)
    timers.create_table()
    return timers


def test_a_failed_advance_is_raised_and_the_fire_delivered_again_after_the_lease(
    view: TimersView, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    due_timer(view, now - timedelta(seconds=1))
    agents = Deliveries()
    failing = TimerWorker(view, agents.fire, clock=lambda: now, lease=LEASE)
    monkeypatch.setattr(failing, "_advance", dropped_connection)
    with pytest.raises(psycopg.OperationalError, match="server closed"):
        agents.serve(failing)
    [row] = timer_rows(view)  # delivered, not advanced: still there, leased
    assert row["leased_until"] == now + LEASE

    later = now + LEASE + timedelta(seconds=1)
    worker = TimerWorker(view, agents.fire, clock=lambda: later, lease=LEASE)
    agents.serve(worker)
    first, again = agents.fires
    assert again.key == first.key  # the same fire: the agent deduplicates it
    assert timer_rows(view) == []


def test_a_failed_claim_is_raised_and_the_row_claimed_by_the_next_run(
    view: TimersView, monkeypatch: pytest.MonkeyPatch
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
