"""Which version of a view's code built its serving tables, in ``projection_versions``.

Its own module because the view records it when its tables are first made, a rebuild records
it when it switches over, and the service and the status read it, none of them through another.
A view whose tables an older version built is rebuilt in the background (``rebuild.upgrade``);
one a newer OwlClaw built is refused, never read or written by code that does not know it.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Literal

VERSIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS projection_versions ("
    " name text PRIMARY KEY, version integer NOT NULL)"
)

LEGACY_VERSION = 1
"""The version of tables made before views carried one (every view was at 1 then)."""


class ViewTooNew(RuntimeError):
    """A view's tables were built by a newer OwlClaw than the one running."""

    def __init__(self, name: str, recorded: int, known: int):
        super().__init__(
            f"the {name} view's tables were built by a newer OwlClaw (view version {recorded};"
            f" this one knows up to {known})"
        )
        self.name = name


def record_on_creation(name: str, first_table: str, version: int) -> Composed:
    """The statement that records a view's version as its tables are made (before its DDL):
    ``version`` when they do not exist yet, ``LEGACY_VERSION`` when they were made before views
    carried one; nothing when a version is already recorded."""
    return SQL(
        "INSERT INTO projection_versions (name, version)"
        " SELECT {name}, CASE WHEN to_regclass({table}) IS NULL THEN {version} ELSE {legacy} END"
        " ON CONFLICT (name) DO NOTHING"
    ).format(
        name=Literal(name),
        table=Literal(first_table),
        version=Literal(version),
        legacy=Literal(LEGACY_VERSION),
    )


def record(curs: Cursor[DictRow], name: str, version: int) -> None:
    """Record that ``version`` built the view's serving tables (a rebuild switching over)."""
    curs.execute(VERSIONS_DDL)
    curs.execute(
        "INSERT INTO projection_versions (name, version) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET version = excluded.version",
        (name, version),
    )


def recorded(curs: Cursor[DictRow], names: Sequence[str]) -> dict[str, int]:
    """The recorded version of each of ``names`` that has one (none before any view's tables
    were made)."""
    exists = curs.execute("SELECT to_regclass('projection_versions') IS NOT NULL AS e").fetchone()
    if not exists or not exists["e"]:
        return {}
    rows = curs.execute(
        "SELECT name, version FROM projection_versions WHERE name = ANY(%s)", (list(names),)
    ).fetchall()
    return {r["name"]: r["version"] for r in rows}
