"""Rebuild a view from the start of the log into new tables, then switch over; ``upgrade``: the
same, by itself, when an older version of the view's code built its serving tables (and
``refuse_newer``: none when a newer OwlClaw built them).

Its own module because it drives a runner over a fresh copy of the view and swaps tables,
tracking, parked events and the recorded version under the projection's lock; the runner's loop
knows nothing of it. One rebuild of a view runs at a time, across processes: it holds a session
lock (projections.locks) for its whole length, which the status reads to report its progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from events.ledger import Ledger
from projections import parked as parking
from projections import versions
from projections.locks import REBUILD_LOCK_CLASS, RELEASE_REBUILD_LOCK, TAKE_REBUILD_LOCK
from projections.runner import ProjectionRunner
from projections.view import TRACKING_TABLE, View

LOCK_POLL_S = 0.5
"""How often ``upgrade`` tries again for the lock of a rebuild another process runs."""


class RebuildRunning(RuntimeError):
    """Another rebuild of the view holds its lock."""

    def __init__(self, name: str):
        super().__init__(f"a rebuild of the {name} view is already running")
        self.name = name


def rebuild(
    ledger: Ledger,
    view_class: type[View],
    /,
    progress: Callable[[int, int], None] | None = None,
    **view_options: Any,
) -> int:
    """Rebuild a view from position 0 into new tables, then switch over atomically; the log
    position the new tables had reached. ``RebuildRunning`` while another rebuild of it runs.

    The serving tables keep answering (and a live runner keeps updating them) until the switch,
    which renames the new tables into place in one transaction under the projection's lock once
    they have caught up with the serving ones. A live runner then notices the moved tracking
    position and continues from it. The events the
    rebuild parked replace the live view's, and the running code's version of the view is
    recorded as the one that built its tables.
    """
    live = view_class(ledger, **view_options)
    with _rebuild_lock(live, stop=None):
        position = _rebuild(ledger, live, progress, None, view_options)
    assert position is not None
    return position


def upgrade(
    ledger: Ledger,
    view_class: type[View],
    /,
    stop: threading.Event,
    progress: Callable[[int, int], None] | None = None,
    **view_options: Any,
) -> int | None:
    """``rebuild`` the view (its tables created) if an older version of its code built its
    serving tables, after any other rebuild of it ends; the position it switched over at, or
    None: nothing to do (another process upgraded it meanwhile), or ``stop`` was set first (the
    serving tables stay as they were)."""
    live = view_class(ledger, **view_options)
    with _rebuild_lock(live, stop) as taken:
        if not taken or not older([live]):
            return None
        return _rebuild(ledger, live, progress, stop, view_options)


def _recorded_of(views: Sequence[View]) -> dict[str, int]:
    if not views:
        return {}
    with views[0].transaction() as curs:
        return versions.recorded(curs, [v.name for v in views])


def refuse_newer(views: Sequence[View]) -> None:
    """Raise ``ViewTooNew`` for the first view whose tables a newer OwlClaw built (before this
    one creates or changes any of them)."""
    built = _recorded_of(views)
    for view in views:
        if built.get(view.name, 0) > view.version:
            raise versions.ViewTooNew(view.name, built[view.name], view.version)


def older(views: Sequence[View]) -> list[View]:
    """The views (their tables created) whose serving tables an older version of their code
    built: each is to be rebuilt."""
    built = _recorded_of(views)
    return [v for v in views if built.get(v.name, v.version) < v.version]


@contextmanager
def _rebuild_lock(view: View, stop: threading.Event | None) -> Iterator[bool]:
    """Hold the view's rebuild lock: without ``stop``, ``RebuildRunning`` if another holds it;
    with it, wait for it (False: ``stop`` was set first)."""
    key = (REBUILD_LOCK_CLASS, view.name)

    def take(conn: psycopg.Connection[DictRow]) -> bool:
        row = conn.execute(TAKE_REBUILD_LOCK, key).fetchone()
        return bool(row and row["taken"])

    with view.connection() as conn:
        taken = take(conn)
        while not taken and stop is not None and not stop.wait(LOCK_POLL_S):
            taken = take(conn)
        if not taken and stop is None:
            raise RebuildRunning(view.name)
        try:
            yield taken
        finally:
            if taken:
                with suppress(psycopg.Error):  # a lost connection released it already
                    conn.execute(RELEASE_REBUILD_LOCK, key)


def _rebuild(
    ledger: Ledger,
    live: View,
    progress: Callable[[int, int], None] | None,
    stop: threading.Event | None,
    view_options: dict[str, Any],
) -> int | None:
    fresh = type(live)(ledger, rebuilding=True, **view_options)
    fresh.create_table()
    with fresh.transaction(commit=True) as curs:
        fresh.drop_tables(curs)
        curs.execute(
            SQL("DELETE FROM {} WHERE application_name = %s").format(Identifier(TRACKING_TABLE)),
            (fresh.tracking_name,),
        )
        parking.forget(curs, fresh.tracking_name)
    fresh.create_table()
    runner = ProjectionRunner(ledger, fresh)
    while True:
        runner.catch_up(progress=progress, stop=stop)
        if stop is not None and stop.is_set():
            return None
        if _switch(live, fresh, runner):
            break
    live.switched_over()
    return runner.position


def _switch(live: View, fresh: View, runner: ProjectionRunner) -> bool:
    """Rename the rebuilt tables into place, under the projection's lock, if they have reached
    the serving view's tracked position; False (nothing changed) when it moved past them (a
    live runner then would not go back for the events in between until the next one came)."""
    tracking = Identifier(TRACKING_TABLE)
    with live.transaction(commit=True) as curs:
        curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (runner.lock_key,))
        row = curs.execute(
            SQL("SELECT notification_id FROM {} WHERE application_name = %s").format(tracking),
            (live.tracking_name,),
        ).fetchone()
        if row is not None and row["notification_id"] > runner.position:
            return False
        live.drop_tables(curs)
        fresh.rename_into(curs, live)
        curs.execute(
            SQL("DELETE FROM {} WHERE application_name = %s").format(tracking),
            (live.tracking_name,),
        )
        curs.execute(
            SQL("UPDATE {} SET application_name = %s WHERE application_name = %s").format(tracking),
            (live.tracking_name, fresh.tracking_name),
        )
        parking.move(curs, fresh.tracking_name, live.tracking_name)
        versions.record(curs, live.name, live.version)
    return True
