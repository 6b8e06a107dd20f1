"""How far every registered view has absorbed the log: archiving moves only runs whose events
lie at or below it, so a live view never has to read an archive file for events it has not
seen yet (only a rebuild reads them, ``events.ledger_log``).

Its own module because archiving (the CLI and the retention job, above this layer) asks it,
and it reads the views' tracking table, which only ``projections`` does.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from psycopg.sql import SQL, Identifier

from events.ledger import Ledger
from projections.view import TRACKING_TABLE


@dataclass(frozen=True)
class Absorbed:
    """The log position every view has absorbed, and the view furthest behind."""

    position: int
    view: str
    """The view at ``position``."""


def absorbed(ledger: Ledger, views: Collection[str]) -> Absorbed:
    """The lowest tracking position of ``views`` (their names, at least one); a view that has
    not tracked anything yet (no row, or no tracking table) is at 0."""
    with ledger.database.datastore.get_connection() as conn:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS e", (TRACKING_TABLE,))
        row = exists.fetchone()
        tracked: dict[str, int] = {}
        if row is not None and row["e"]:
            found = conn.execute(
                SQL(
                    "SELECT application_name, notification_id FROM {} WHERE application_name"
                    " = ANY(%s)"
                ).format(Identifier(TRACKING_TABLE)),
                (list(views),),
            ).fetchall()
            tracked = {r["application_name"]: r["notification_id"] for r in found}
    behind = min(sorted(views), key=lambda name: tracked.get(name, 0))
    return Absorbed(tracked.get(behind, 0), behind)
