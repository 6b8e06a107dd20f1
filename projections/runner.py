"""Runs a view over the ledger: catch up, follow, park poison events.

Each batch of events is applied and tracked in one transaction under the projection's advisory
lock, after re-reading the tracked position inside that transaction. So two runners of one
projection (a restarted process, a rebuild switching over) never apply an event twice, and a
crash at any point leaves the view exactly at a batch boundary.

A batch the view cannot apply (its ``prepare`` or ``apply`` raises anything but an
infrastructure error) is retried a few times, then applied one event at a time: an event that
still fails is parked in ``projection_errors`` (projections.parked) in the transaction that
tracks past it, and the view goes on. An infrastructure error (the database unreachable, the
LISTEN connection dropped) is never parked: it is raised, and the runner resumes from its tracked
position once restarted.

Status (projections.status), retrying parked events (projections.retry) and rebuilding
(projections.rebuild) live beside it: they read or repair a view, not run it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from projections import parked as parking
from projections.failures import ProjectionFailed, is_infrastructure
from projections.locks import channel, lock_key
from projections.parked import describe
from projections.status import ProjectionStatus, projection_status
from projections.view import TRACKING_TABLE, View

BATCH_SIZE = 1000

log = logging.getLogger(__name__)


class ProjectionRunner:
    """Applies the ledger to one view, in batches; ``serve`` follows the log until stopped."""

    HELD_BACK_POLL_SECONDS = 0.005
    IDLE_WAKE_SECONDS = 1.0
    BATCH_ATTEMPTS = 3
    RETRY_BACKOFF_SECONDS = 0.05

    def __init__(self, ledger: Ledger, view: View):
        self.ledger = ledger
        self.view = view
        self.position = view.max_tracking_id(view.tracking_name) or 0
        self.error: ProjectionFailed | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._advanced = threading.Condition()
        self.lock_key = lock_key(view)

    # --- running ------------------------------------------------------------------------------

    def step(self) -> int:
        """Apply the next batch; returns how many log positions the view advanced."""
        head = self.ledger.log.head()
        start = self.position
        if head <= start:
            return 0
        batch = self.ledger.log.read(
            after=start, limit=BATCH_SIZE, up_to=head, types=self.view.events
        )
        end = batch[-1].position if len(batch) == BATCH_SIZE else head
        for attempt in range(self.BATCH_ATTEMPTS):
            try:
                self.view.prepare(batch)
                if not self._transact(start, end, lambda curs: self._apply(curs, batch)):
                    return 0
                break
            except Exception as e:
                if is_infrastructure(e):
                    raise
                log.warning(
                    "projection %s: batch after log position %d failed (attempt %d of %d): %s",
                    self.view.name,
                    start,
                    attempt + 1,
                    self.BATCH_ATTEMPTS,
                    describe(e),
                )
                if attempt + 1 < self.BATCH_ATTEMPTS:
                    time.sleep(self.RETRY_BACKOFF_SECONDS * 2**attempt)
        else:
            return self._isolate(start, batch, end)
        self.view.committed(batch)
        return end - start

    def _apply(self, curs: Cursor[DictRow], batch: list[LoggedEvent]) -> None:
        with curs.connection.pipeline():
            for logged in batch:
                self.view.apply(curs, logged)

    def _isolate(self, start: int, batch: list[LoggedEvent], end: int) -> int:
        """Apply the batch one event at a time, parking each event that still fails."""
        for index, logged in enumerate(batch):
            upto = end if index == len(batch) - 1 else logged.position
            if not self._apply_or_park(self.position, upto, logged):
                break
        return max(0, self.position - start)

    def _apply_or_park(self, start: int, end: int, logged: LoggedEvent) -> bool:
        """Apply one event, or park it, and track ``end``; False when another runner moved
        the tracked position."""
        failure = self._prepare_one(logged)

        def work(curs: Cursor[DictRow]) -> None:
            nonlocal failure
            if failure is None:
                failure = self._apply_one(curs, logged)
            if failure is not None:
                parking.park(
                    curs, self.view.tracking_name, logged, failure, self.BATCH_ATTEMPTS + 1
                )

        if not self._transact(start, end, work):
            return False
        if failure is None:
            self.view.committed([logged])
        else:
            log.error(
                "projection %s: parked %s at log position %d: %s",
                self.view.name,
                type(logged.event).__name__,
                logged.position,
                describe(failure),
            )
        return True

    def _prepare_one(self, logged: LoggedEvent) -> Exception | None:
        try:
            self.view.prepare([logged])
        except Exception as e:
            if is_infrastructure(e):
                raise
            return e
        return None

    def _apply_one(self, curs: Cursor[DictRow], logged: LoggedEvent) -> Exception | None:
        """Apply one event in a savepoint: on failure the view's rows are as before it."""
        try:
            with curs.connection.transaction():
                self.view.apply(curs, logged)
        except Exception as e:
            if is_infrastructure(e):
                raise
            return e
        return None

    def _transact(self, start: int, end: int, work: Callable[[Cursor[DictRow]], None]) -> bool:
        """Do ``work`` and track ``end`` in one transaction under the projection's lock; False
        (and nothing done) when another runner moved the tracked position off ``start``."""
        with self.view.transaction(commit=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.lock_key,))
            tracked = curs.execute(
                SQL("SELECT notification_id FROM {} WHERE application_name = %s").format(
                    Identifier(TRACKING_TABLE)
                ),
                (self.view.tracking_name,),
            ).fetchone()
            current = tracked["notification_id"] if tracked else 0
            if current != start:  # another runner or a switch-over moved it: resume from there
                self.position = current
                return False
            work(curs)
            self.view._insert_tracking(curs, Tracking(self.view.tracking_name, end))
            curs.execute("SELECT pg_notify(%s, %s)", (channel(self.view.name), str(end)))
        self.position = end
        with self._advanced:
            self._advanced.notify_all()
        return True

    def catch_up(
        self,
        until: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Apply everything up to ``until`` in this thread (or until ``stop`` is set); by
        default everything committed so far, also events an older open transaction still holds
        back from readers (``head`` would stop short of them, and a caller that has just
        appended would not see its own events)."""
        target = self.ledger.log.last_committed() if until is None else until
        while self.position < target and not (stop is not None and stop.is_set()):
            if self.step() == 0 and self.position < target:
                time.sleep(self.HELD_BACK_POLL_SECONDS)
            if progress:
                progress(self.position, target)
        return self.position

    def serve(self, stop: threading.Event) -> None:
        """Catch up, then follow the log (woken by LISTEN/NOTIFY) until ``stop`` is set.

        Blocking. An infrastructure error (database unreachable, the LISTEN connection dropped)
        is raised, for the caller to restart ``serve`` after a backoff: it resumes from the
        tracked position, so no event is lost or applied twice.
        """
        ledger = self.ledger
        self.position = self.view.max_tracking_id(self.view.tracking_name) or 0
        with ledger.database.listen() as conn:
            while not stop.is_set():
                if self.step():
                    continue
                held = ledger.log.is_held_back(self.position)
                wait = self.HELD_BACK_POLL_SECONDS if held else self.IDLE_WAKE_SECONDS
                for _ in conn.notifies(timeout=wait, stop_after=1):
                    pass

    def start(self) -> ProjectionRunner:
        """Serve in a thread of its own (for tests and scripts); an error ends it, kept in
        ``error``."""
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"projection-{self.view.name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            self.serve(self._stop)
        except Exception as e:
            self.error = ProjectionFailed(self.view.name, getattr(e, "position", None), e)
        finally:
            with self._advanced:
                self._advanced.notify_all()

    # --- reading ------------------------------------------------------------------------------

    def wait_for(self, position: int, timeout: float) -> bool:
        """Block until the view has absorbed ``position`` (read-your-writes)."""
        deadline = time.monotonic() + timeout
        with self._advanced:
            while self.position < position and self.error is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._advanced.wait(remaining)
        return self.position >= position

    def status(self) -> ProjectionStatus:
        return projection_status(self.ledger, self.view, self.running, self.error)
