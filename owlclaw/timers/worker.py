"""The built-in timer backend's worker: claims due timer rows and delivers their fires.

Any number of workers can run (rows are claimed with FOR UPDATE SKIP LOCKED and a lease). A row
advances only after its fires were delivered; a worker that dies leaves the lease to expire and
another delivers again — the agent deduplicates by (schedule id, fire time), so nothing is lost
and nothing doubles. Fires missed while no worker ran follow the schedule's misfire policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from owlclaw.timers.fires import GRACE, FireOutcome, TimerFire, cron_times, plan
from owlclaw.timers.service import TimersView
from projections.schedules import next_fire

log = logging.getLogger(__name__)
Deliver = Callable[[TimerFire], Awaitable[FireOutcome]]
"""Hand a fire to its agent (``Agents.fire``); returns once the verdict is committed."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RetryPolicy:
    """Delivery retries (like a Hatchet task's ``retries``), with exponential backoff."""

    max_retries: int = 3
    backoff_s: float = 0.05


async def deliver_with_retries(deliver: Deliver, fire: TimerFire, policy: RetryPolicy) -> int:
    """Deliver, retrying failures up to ``policy.max_retries`` times; returns the attempts made.
    The last failure is raised."""
    for attempt in range(policy.max_retries + 1):
        try:
            await deliver(fire)
            return attempt + 1
        except Exception as error:
            if attempt == policy.max_retries:
                raise
            log.warning("delivery of %s failed (attempt %d): %s", fire.key, attempt + 1, error)
            await asyncio.sleep(policy.backoff_s * 2**attempt)
    raise AssertionError("unreachable")


class TimerWorker:
    POLL_S = 0.05
    """Idle poll interval: bounds fire lateness (the bench target is p99 <= 250 ms)."""

    def __init__(
        self,
        view: TimersView,
        deliver: Deliver,
        *,
        clock: Callable[[], datetime] = utc_now,
        lease: timedelta = timedelta(minutes=5),
        retry: RetryPolicy | None = None,
        batch: int = 100,
        grace: timedelta = GRACE,
    ):
        self.view = view
        self.deliver = deliver
        self.clock = clock
        self.lease = lease
        self.retry = retry or RetryPolicy()
        self.batch = batch
        self.grace = grace

    async def tick(self) -> int:
        """Deliver every timer due now and wait for it; returns how many rows were handled."""
        now = self.clock()
        results = await asyncio.gather(*(self._handle(row, now) for row in self._claim(now)))
        return sum(results)

    def _claim(self, now: datetime) -> list[Any]:
        with self.view.datastore.transaction(commit=True) as curs:
            return self.view.due(curs, now, self.lease, self.batch)

    async def _handle(self, row: dict[str, Any], now: datetime) -> int:
        due = [row["next_fire_at"]]
        if row["kind"] == "cron":
            due += cron_times(row["cron"], row["next_fire_at"], now)
        window = timedelta(seconds=row["catch_up_window_s"])
        try:
            for fire_time, missed in plan(due, now, row["misfire"], window, self.grace):
                fire = TimerFire(row["agent_id"], row["schedule_id"], fire_time, missed)
                await deliver_with_retries(self.deliver, fire, self.retry)
        except Exception as error:  # the lease expires and a worker tries again
            log.error("timer %s not delivered: %s", row["schedule_id"], error)
            return 0
        await asyncio.to_thread(self._advance, row, now, due[-1])
        return 1

    def _advance(self, row: dict[str, Any], now: datetime, last_due: datetime) -> None:
        """The row's fires are delivered: move a cron row to its next fire, delete a one-off."""
        with self.view.datastore.transaction(commit=True) as curs:
            if row["kind"] == "cron":
                curs.execute(
                    self.view.sql(
                        "UPDATE {timers} SET next_fire_at = %s, leased_until = NULL,"
                        " attempts = 0 WHERE schedule_id = %s"
                    ),
                    (next_fire(row["cron"], max(now, last_due)), row["schedule_id"]),
                )
            else:
                curs.execute(
                    self.view.sql("DELETE FROM {timers} WHERE schedule_id = %s"),
                    (row["schedule_id"],),
                )

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver due timers until ``stop`` is set. Rows are delivered concurrently (fires of
        one agent still queue behind each other in its mailbox), so one slow run does not make
        other agents' fires late.

        A database error (claiming rows, or advancing one after its fires were delivered) is
        raised once the deliveries under way have ended, for a supervisor to restart the
        worker. Nothing is lost or doubled: an unclaimed row is claimed again, and a claimed
        row that did not advance is delivered again when its lease expires (the agent
        deduplicates its fires)."""
        delivering: set[asyncio.Task[int]] = set()
        errors: list[BaseException] = []

        def delivered(task: asyncio.Task[int]) -> None:
            delivering.discard(task)
            if not task.cancelled() and (error := task.exception()) is not None:
                errors.append(error)

        try:
            while not stop.is_set() and not errors:
                now = self.clock()
                rows = await asyncio.to_thread(self._claim, now)
                for row in rows:
                    task = asyncio.create_task(self._handle(row, now))
                    delivering.add(task)
                    task.add_done_callback(delivered)
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.POLL_S)
                else:
                    await asyncio.sleep(0)
        finally:
            await asyncio.gather(*delivering, return_exceptions=True)
        if errors:
            raise errors[0]
