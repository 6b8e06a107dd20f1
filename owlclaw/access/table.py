"""The ``principals`` table: the principal stream's current state, for per-request lookups.

Each row carries the stream version that last changed it, and is only ever replaced by a row of
a later version, so bringing the table up to the stream is idempotent and safe to repeat from
any process (after each change, and when a server starts: a change whose process died between
its event and its row is then caught up)."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
from eventsourcing.postgres import PostgresDatastore
from psycopg.types.json import Jsonb

from events.postgres import schema_lock
from owlclaw.access.authorize import Principal
from owlclaw.access.principals import PrincipalRecord
from owlclaw.access.roles import parse_grant

_CREATE = (
    "CREATE TABLE IF NOT EXISTS principals ("
    " name text PRIMARY KEY, grants jsonb NOT NULL, token_sha256 text NOT NULL,"
    " revoked boolean NOT NULL, version integer NOT NULL)",
    "CREATE INDEX IF NOT EXISTS principals_token ON principals (token_sha256)",
)
_UPSERT = (
    "INSERT INTO principals (name, grants, token_sha256, revoked, version)"
    " VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (name) DO UPDATE SET grants = excluded.grants,"
    " token_sha256 = excluded.token_sha256, revoked = excluded.revoked,"
    " version = excluded.version WHERE principals.version < excluded.version"
)
_LOOKUP = "SELECT name, grants FROM principals WHERE token_sha256 = %s AND NOT revoked"


class PrincipalTable:
    def __init__(self, datastore: PostgresDatastore):
        self._datastore = datastore
        with schema_lock(datastore), datastore.get_connection() as conn:
            for statement in _CREATE:
                conn.execute(statement)

    def catch_up(self, records: Iterable[PrincipalRecord]) -> None:
        """Bring the rows up to ``records`` (the fold of the stream), in one transaction."""
        rows = [
            (r.name, Jsonb([str(g) for g in r.grants]), r.token_sha256, r.revoked, r.version)
            for r in records
        ]
        if not rows:
            return
        with self._datastore.transaction(commit=True) as curs:
            curs.executemany(_UPSERT, rows)

    def principal(self, token_sha256: str) -> Principal | None:
        """The live principal whose token has this digest."""
        with self._datastore.get_connection() as conn:
            row = conn.execute(_LOOKUP, (token_sha256,)).fetchone()
        if row is None:
            return None
        grants = msgspec.convert(row["grants"], list[str])
        return Principal(row["name"], tuple(parse_grant(g) for g in grants))
