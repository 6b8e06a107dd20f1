"""The built-in timer backend's worker: claims due timer rows and delivers their fires.

Any number of workers can run (rows are claimed with FOR UPDATE SKIP LOCKED and a lease). A row
advances only after its fires were delivered; a worker that dies leaves the lease to expire and
another delivers again — the agent deduplicates by (schedule id, fire time), so nothing is lost
and nothing doubles. A delivery that fails (the database restarted under the agents' writer) is
not left to the lease: the worker releases the claim, to be claimed again after a short backoff,
and a claim's release or advance that meets the database away is written once it answers.
Fires missed while no worker ran follow the schedule's ``on_missed`` policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import psycopg
from eventsourcing import persistence

from events.cron import cron_times, next_fire
from owlclaw.messages import Fire, FireOutcome
from owlclaw.timers.fires import GRACE, on_missed_of, plan
from owlclaw.timers.registrations import TimerRegistrations

log = logging.getLogger(__name__)
Deliver = Callable[[Fire], Awaitable[FireOutcome]]
"""Hand a fire to its agent (``Agents.ask``); returns once the verdict is committed."""
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    persistence.OperationalError,
    persistence.InterfaceError,
)
"""The database did not answer (it is restarting, or the connection died): worth trying again."""
REDELIVER_S = 1.0
"""A row whose delivery failed may be claimed again this long after the failure, doubling with
each further failed claim (``attempts``) up to ``REDELIVER_MAX_S`` (and never beyond the lease)."""
REDELIVER_MAX_S = 30.0
ANSWER_POLL_MAX_S = 1.0
"""How often, at most, a claim's write is tried again while the database does not answer."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RetryPolicy:
    """Delivery retries (like a Hatchet task's ``retries``), with exponential backoff."""

    max_retries: int = 3
    backoff_s: float = 0.05


async def deliver_with_retries(deliver: Deliver, fire: Fire, policy: RetryPolicy) -> int:
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
        view: TimerRegistrations,
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
        never = asyncio.Event()
        rows = self._claim(now)
        results = await asyncio.gather(*(self._handle(row, now, never) for row in rows))
        return sum(results)

    def _claim(self, now: datetime) -> list[Any]:
        try:
            return self.view.claim(now, self.lease, self.batch)
        except DATABASE_ERRORS:
            self.view.ledger.database.drop_dead_connections()  # the next claim gets a live one
            raise

    async def _handle(self, row: dict[str, Any], now: datetime, stop: asyncio.Event) -> int:
        due = [row["next_fire_at"]]
        if row["kind"] == "cron":
            due += cron_times(row["cron"], row["next_fire_at"], now)
        window = timedelta(seconds=row["catch_up_window_s"])
        try:
            for planned in plan(due, now, on_missed_of(row["misfire"]), window, self.grace):
                fire = Fire(
                    agent_id=row["agent_id"],
                    schedule_id=row["schedule_id"],
                    fire_time=planned.fire_time,
                    missed=planned.missed,
                    occurrences=planned.occurrences,
                    first_fire_time=planned.first,
                )
                await deliver_with_retries(self.deliver, fire, self.retry)
        except Exception as error:
            log.error("timer %s not delivered: %s", row["schedule_id"], error)
            retry_at = self.clock() + self.redeliver_after(row["attempts"])
            await self._when_answered(row, "release", partial(self._release, row, retry_at), stop)
            return 0
        advance = partial(self._advance, row, now, due[-1])
        return int(await self._when_answered(row, "advance", advance, stop))

    def redeliver_after(self, attempts: int) -> timedelta:
        """When a row whose delivery failed may be claimed again, after its ``attempts``-th
        claim: soon (the failure was likely the database restarting), backing off for a fire
        that keeps failing; never later than its lease would have freed it."""
        wait = min(REDELIVER_S * 2 ** min(max(attempts - 1, 0), 16), REDELIVER_MAX_S)
        return min(timedelta(seconds=wait), self.lease)

    async def _when_answered(
        self, row: dict[str, Any], what: str, write: Callable[[], None], stop: asyncio.Event
    ) -> bool:
        """Run ``write`` (a statement on this worker's claim of ``row``) in a thread; while the
        database does not answer, try again until it does. Gives up when the worker is stopped
        or the claim's lease is over (another worker may hold the row by then): the lease
        decides as before. Whether it was written; any other error is raised."""
        wait = 0.05
        while True:
            try:
                await asyncio.to_thread(write)
                return True
            except DATABASE_ERRORS as error:
                await asyncio.to_thread(self.view.ledger.database.drop_dead_connections)
                if stop.is_set() or self.clock() >= row["leased_until"]:
                    log.warning(
                        "timer %s: %s not written (%s), its lease decides",
                        row["schedule_id"],
                        what,
                        error,
                    )
                    return False
                log.info("timer %s: %s waits for the database: %s", row["schedule_id"], what, error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            wait = min(wait * 2, ANSWER_POLL_MAX_S)

    def _release(self, row: dict[str, Any], retry_at: datetime) -> None:
        """Give back this worker's claim of ``row`` (a failed delivery): due again at
        ``retry_at``, for this worker or another. A claim that is no longer this one (its lease
        ran out and another worker took the row, or the schedule was cancelled) is left alone."""
        self.view.release(row["schedule_id"], row["leased_until"], retry_at)

    def _advance(self, row: dict[str, Any], now: datetime, last_due: datetime) -> None:
        """The row's fires are delivered: move a cron row to its next fire, delete a one-off."""
        following = next_fire(row["cron"], max(now, last_due)) if row["kind"] == "cron" else None
        self.view.advance(row["schedule_id"], following)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver due timers until ``stop`` is set. Rows are delivered concurrently (fires of
        one agent still queue behind each other in its mailbox), so one slow run does not make
        other agents' fires late.

        A database error claiming rows is raised once the deliveries under way have ended, for
        a supervisor to restart the worker. Nothing is lost or doubled: an unclaimed row is
        claimed again; a claimed row whose delivery failed is released, and one delivered is
        advanced, once the database answers (a worker stopped before that leaves the row to
        its lease, and the agent deduplicates a fire delivered again)."""
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
                    task = asyncio.create_task(self._handle(row, now, stop))
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
