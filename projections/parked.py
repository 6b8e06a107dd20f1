"""Events a view could not apply, parked in ``projection_errors`` so that the view goes on.

The runner parks an event in the same transaction that moves the view's tracking position past
it, so every event of the log is either in the view or in this table, never silently lost.
``projections.retry.retry_parked`` re-applies parked events once their cause is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import Cursor
from psycopg.rows import DictRow

from events.codec import topic_of
from events.ledger_log import LoggedEvent

ERRORS_DDL = (
    "CREATE TABLE IF NOT EXISTS projection_errors ("
    " view_name text NOT NULL, position bigint NOT NULL, stream_id uuid NOT NULL,"
    " version integer NOT NULL, topic text NOT NULL, error text NOT NULL,"
    " first_seen timestamptz NOT NULL, last_seen timestamptz NOT NULL,"
    " attempts integer NOT NULL, PRIMARY KEY (view_name, position))"
)


@dataclass(frozen=True)
class ParkedEvent:
    """One event a view skipped: where it is in the log, what it is, and why it failed."""

    view: str
    position: int
    stream_id: UUID
    version: int
    topic: str
    error: str
    first_seen: datetime
    last_seen: datetime
    attempts: int


def describe(error: BaseException) -> str:
    """The error as recorded: its type and message."""
    return f"{type(error).__name__}: {error}"


def park(
    curs: Cursor[DictRow], view: str, logged: LoggedEvent, error: BaseException, attempts: int
) -> None:
    """Record (or, when it failed before, update) the event as not applied by ``view``."""
    e = logged.event
    curs.execute(
        "INSERT INTO projection_errors (view_name, position, stream_id, version, topic, error,"
        " first_seen, last_seen, attempts) VALUES (%s, %s, %s, %s, %s, %s, now(), now(), %s)"
        " ON CONFLICT (view_name, position) DO UPDATE SET error = excluded.error,"
        " last_seen = excluded.last_seen,"
        " attempts = projection_errors.attempts + excluded.attempts",
        (
            view,
            logged.position,
            e.originator_id,
            e.originator_version,
            topic_of(type(e)),
            describe(error),
            attempts,
        ),
    )


def unpark(curs: Cursor[DictRow], view: str, position: int) -> None:
    curs.execute(
        "DELETE FROM projection_errors WHERE view_name = %s AND position = %s", (view, position)
    )


def parked(curs: Cursor[DictRow], view: str) -> list[ParkedEvent]:
    """The events ``view`` skipped, in log order."""
    rows = curs.execute(
        "SELECT view_name, position, stream_id, version, topic, error, first_seen, last_seen,"
        " attempts FROM projection_errors WHERE view_name = %s ORDER BY position",
        (view,),
    ).fetchall()
    return [
        ParkedEvent(
            view=r["view_name"],
            position=r["position"],
            stream_id=r["stream_id"],
            version=r["version"],
            topic=r["topic"],
            error=r["error"],
            first_seen=r["first_seen"],
            last_seen=r["last_seen"],
            attempts=r["attempts"],
        )
        for r in rows
    ]


def move(curs: Cursor[DictRow], source: str, target: str) -> None:
    """Give ``source``'s parked events to ``target`` (a rebuild switching over)."""
    curs.execute("DELETE FROM projection_errors WHERE view_name = %s", (target,))
    curs.execute(
        "UPDATE projection_errors SET view_name = %s WHERE view_name = %s", (target, source)
    )


def forget(curs: Cursor[DictRow], view: str) -> None:
    curs.execute("DELETE FROM projection_errors WHERE view_name = %s", (view,))
