"""Rebuild a view from the start of the log into new tables, then switch over.

Its own module because it drives a runner over a fresh copy of the view and swaps tables,
tracking and parked events under the projection's lock; the runner's loop knows nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.sql import SQL, Identifier

from events.ledger import Ledger
from projections import parked as parking
from projections.runner import ProjectionRunner
from projections.view import TRACKING_TABLE, View


def rebuild(
    ledger: Ledger,
    view_class: type[View],
    /,
    progress: Callable[[int, int], None] | None = None,
    **view_options: Any,
) -> int:
    """Rebuild a view from position 0 into new tables, then switch over atomically.

    The serving tables keep answering (and a live runner keeps updating them) until the switch,
    which renames the new tables into place in one transaction under the projection's lock. A
    live runner then notices the moved tracking position and continues from it. The events the
    rebuild parked replace the live view's.
    """
    fresh = view_class(ledger, rebuilding=True, **view_options)
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
    runner.catch_up(progress=progress)
    live = view_class(ledger, **view_options)
    with live.transaction(commit=True) as curs:
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
        parking.move(curs, fresh.tracking_name, live.tracking_name)
    live.switched_over()
    return runner.position
