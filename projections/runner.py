"""Runs a view over the ledger: catch up, follow, report lag, rebuild and switch over.

Each batch of events is applied and tracked in one transaction under the projection's advisory
lock, after re-reading the tracked position inside that transaction. So two runners of one
projection (a restarted process, a rebuild switching over) never apply an event twice, and a
crash at any point leaves the view exactly at a batch boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from eventsourcing.persistence import Tracking
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from events.ledger import Ledger, LoggedEvent
from events.recorder import connect_kwargs
from projections.view import TRACKING_TABLE, View

BATCH_SIZE = 1000


class ProjectionFailed(RuntimeError):
    """The projection stopped at an event it cannot apply; names the log position."""

    def __init__(self, name: str, position: int | None, cause: BaseException):
        where = f" at log position {position}" if position is not None else ""
        super().__init__(f"projection {name!r} stopped{where}: {cause}")
        self.position = position
        self.cause = cause


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    position: int
    head: int
    lag_events: int
    lag_seconds: float
    running: bool
    error: str | None


def channel(name: str) -> str:
    return f"owlclaw_projection_{name}"


class ProjectionRunner:
    """Applies the ledger to one view, in batches, in a thread of its own."""

    HELD_BACK_POLL_SECONDS = 0.005
    IDLE_WAKE_SECONDS = 1.0

    def __init__(self, ledger: Ledger, view: View):
        self.ledger = ledger
        self.view = view
        self.position = view.max_tracking_id(view.tracking_name) or 0
        self.error: ProjectionFailed | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._advanced = threading.Condition()
        self.lock_key = f"owlclaw-projection:{view.name}"

    # --- running ------------------------------------------------------------------------------

    def step(self) -> int:
        """Apply the next batch; returns how many log positions the view advanced."""
        head = self.ledger.head()
        start = self.position
        if head <= start:
            return 0
        batch = self.ledger.read(after=start, limit=BATCH_SIZE, up_to=head, types=self.view.events)
        end = batch[-1].position if len(batch) == BATCH_SIZE else head
        try:
            self.view.prepare(batch)
        except Exception as e:
            raise ProjectionFailed(self.view.name, batch[0].position, e) from e
        with self.view.datastore.transaction(commit=True) as curs:
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
                return 0
            self._apply(curs, batch)
            self.view._insert_tracking(curs, Tracking(self.view.tracking_name, end))
            curs.execute("SELECT pg_notify(%s, %s)", (channel(self.view.name), str(end)))
        self.position = end
        self.view.committed(batch)
        with self._advanced:
            self._advanced.notify_all()
        return end - start

    def _apply(self, curs: Cursor[DictRow], batch: list[LoggedEvent]) -> None:
        logged: LoggedEvent | None = None
        try:
            with curs.connection.pipeline():
                for logged in batch:
                    self.view.apply(curs, logged)
        except Exception as e:
            position = logged.position if logged else None
            raise ProjectionFailed(self.view.name, position, e) from e

    def catch_up(
        self, until: int | None = None, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Apply everything up to ``until`` (default: the current head) in this thread."""
        target = self.ledger.head() if until is None else until
        while self.position < target:
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
        recorder = self.ledger.recorder
        self.position = self.view.max_tracking_id(self.view.tracking_name) or 0
        with psycopg.connect(**connect_kwargs(recorder.datastore), autocommit=True) as conn:
            conn.execute(SQL("LISTEN {}").format(Identifier(recorder.channel_name)))
            while not stop.is_set():
                if self.step():
                    continue
                held = recorder.is_held_back(self.position)
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
        except ProjectionFailed as e:
            self.error = e
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


def projection_status(
    ledger: Ledger, view: View, running: bool = False, error: BaseException | None = None
) -> ProjectionStatus:
    position = view.max_tracking_id(view.tracking_name) or 0
    head = ledger.head()
    lag_seconds = 0.0
    if head > position:
        oldest = ledger.read(after=position, limit=1)
        if oldest:
            age = datetime.now(UTC) - oldest[0].event.timestamp
            lag_seconds = max(0.0, age.total_seconds())
    return ProjectionStatus(
        name=view.name,
        position=position,
        head=head,
        lag_events=max(0, head - position),
        lag_seconds=round(lag_seconds, 3),
        running=running,
        error=str(error) if error else None,
    )


def rebuild(
    ledger: Ledger,
    view_class: type[View],
    progress: Callable[[int, int], None] | None = None,
    **view_options: Any,
) -> int:
    """Rebuild a view from position 0 into new tables, then switch over atomically.

    The serving tables keep answering (and a live runner keeps updating them) until the switch,
    which renames the new tables into place in one transaction under the projection's lock. A
    live runner then notices the moved tracking position and continues from it.
    """
    datastore = ledger.recorder.datastore
    fresh = view_class(datastore, rebuilding=True, **view_options)
    with datastore.transaction(commit=True) as curs:
        fresh.drop_tables(curs)
        curs.execute(
            SQL("DELETE FROM {} WHERE application_name = %s").format(Identifier(TRACKING_TABLE)),
            (fresh.tracking_name,),
        )
    fresh.create_table()
    runner = ProjectionRunner(ledger, fresh)
    runner.catch_up(progress=progress)
    live = view_class(datastore, **view_options)
    with datastore.transaction(commit=True) as curs:
        curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (runner.lock_key,))
        live.drop_tables(curs)
        fresh.rename_into(curs, live)
        curs.execute(
            SQL("DELETE FROM {} WHERE application_name = %s").format(Identifier(TRACKING_TABLE)),
            (live.tracking_name,),
        )
        curs.execute(
            SQL("UPDATE {} SET application_name = %s WHERE application_name = %s").format(
                Identifier(TRACKING_TABLE)
            ),
            (live.tracking_name, fresh.tracking_name),
        )
    return runner.position
