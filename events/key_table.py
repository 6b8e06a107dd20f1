"""The ledger's data keys in PostgreSQL: the ``ledger_keys`` table (``events.keys``).

Each process caches the keys it used. A live key is re-read after ``LIVE_FOR_S`` seconds, so a
key another process destroyed (``owlclaw erase``, another Ray host) stops being used for reading
or writing here within that time (a write under it then fails with KeyDestroyed); a destroyed
key is remembered as destroyed for good. Destroying sets the key's bytes to NULL and vacuums the
table, so its old row version leaves the table's pages (not the WAL: see
docs/ledger-lifecycle.md, Erasure).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.postgres import PostgresDatastore

from events.group_commit import GroupCommit
from events.keys import DataKey, KeyDestroyed, KeyRecord, new_key
from events.postgres import connect_kwargs, schema_lock

LIVE_FOR_S = 5.0
"""How long a process uses a cached live key before reading it again."""

_CREATE = (
    "CREATE TABLE IF NOT EXISTS ledger_keys ("
    " key_id uuid PRIMARY KEY,"
    " scope text NOT NULL CHECK (scope IN ('agent', 'run', 'memory')),"
    " scope_id uuid NOT NULL, agent uuid, key bytea,"
    " created_at timestamptz NOT NULL DEFAULT now(), destroyed_at timestamptz,"
    " destroyed_by text NOT NULL DEFAULT '', reason text NOT NULL DEFAULT '',"
    " CHECK ((key IS NULL) = (destroyed_at IS NOT NULL)))",
    "CREATE INDEX IF NOT EXISTS ledger_keys_agent ON ledger_keys (agent)",
)
_OBTAIN = (
    "WITH unflushed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)),"
    " made AS (INSERT INTO ledger_keys (key_id, scope, scope_id, agent, key)"
    " SELECT * FROM unnest(%(ids)s::uuid[], %(scopes)s::text[], %(scope_ids)s::uuid[],"
    " %(agents)s::uuid[], %(keys)s::bytea[])"
    " ON CONFLICT (key_id) DO NOTHING RETURNING key_id, key)"
    " SELECT key_id, key FROM made, unflushed"
    " UNION ALL SELECT key_id, key FROM ledger_keys, unflushed WHERE key_id = ANY(%(ids)s)"
)
"""Keys made (or the ones another process made first) in one statement, its own transaction:
one round trip for a group of keys. Its commit does not wait for the WAL flush
(``synchronous_commit`` off for this transaction alone, set inside it; each arm that returns a
key reads ``unflushed``): the events sealed under the keys commit after it, and flushing their
commit flushes the WAL before it, these keys' inserts included."""
OBTAIN_GROUP = 256
"""Keys made or read per grouped statement (``obtain``)."""
_RECORD_COLUMNS = "key_id, scope, scope_id, agent, created_at, destroyed_at, destroyed_by, reason"


class PostgresKeyStore:
    """Data keys in the ledger's database, cached in this process."""

    def __init__(self, datastore: PostgresDatastore):
        self._datastore = datastore
        self._cache: dict[UUID, tuple[bytes | None, float]] = {}
        self._obtaining: GroupCommit[DataKey, bytes | None] = GroupCommit(
            self._obtain_group, max_group=OBTAIN_GROUP
        )
        with schema_lock(datastore), datastore.get_connection() as conn:
            for statement in _CREATE:
                conn.execute(statement)

    def obtain(self, ref: DataKey) -> bytes:
        """The key of ``ref``, made if it has none yet. The keys concurrent callers need share
        one statement (``GroupCommit``): every run's first commit makes the run's key."""
        key = self._cached(ref.key_id)
        if key is None:
            key = self._obtaining.submit(ref)
        if key is None:
            raise KeyDestroyed(f"the {ref.scope} key of {ref.scope_id} was destroyed (erased)")
        return key

    def _obtain_group(self, refs: list[DataKey]) -> list[bytes | None]:
        """The keys of ``refs`` (each made if missing; None: destroyed). A key another process
        made while this statement ran is neither made nor seen by it (its snapshot is older):
        read again."""
        wanted = {ref.key_id: ref for ref in refs}
        ids = list(wanted)
        with self._datastore.get_connection() as conn:
            rows = conn.execute(
                _OBTAIN,
                {
                    "ids": ids,
                    "scopes": [r.scope for r in wanted.values()],
                    "scope_ids": [r.scope_id for r in wanted.values()],
                    "agents": [r.agent for r in wanted.values()],
                    "keys": [new_key() for _ in ids],
                },
            ).fetchall()
            found = {row["key_id"]: row["key"] for row in rows}
            if missed := [k for k in ids if k not in found]:
                rows = conn.execute(
                    "SELECT key_id, key FROM ledger_keys WHERE key_id = ANY(%s)", (missed,)
                ).fetchall()
                found |= {row["key_id"]: row["key"] for row in rows}
        return [self._remember(ref.key_id, found.get(ref.key_id)) for ref in refs]

    def get(self, key_id: UUID) -> bytes | None:
        if key_id in self._cache:
            key, read_at = self._cache[key_id]
            if key is None or time.monotonic() - read_at < LIVE_FOR_S:
                return key
        with self._datastore.get_connection() as conn:
            row = conn.execute(
                "SELECT key FROM ledger_keys WHERE key_id = %s", (key_id,)
            ).fetchone()
        return self._remember(key_id, row["key"] if row else None)

    def warm(self, key_ids: Collection[UUID]) -> None:
        """The keys not cached (or due to be read again) in one query: reading a batch of
        memories took a round trip per memory, each under its own key."""
        stale = [k for k in key_ids if self._cached(k) is None and not self._destroyed(k)]
        if not stale:
            return
        with self._datastore.get_connection() as conn:
            rows = conn.execute(
                "SELECT key_id, key FROM ledger_keys WHERE key_id = ANY(%s)", (stale,)
            ).fetchall()
        for row in rows:
            self._remember(row["key_id"], row["key"])

    def records(
        self, *, key_ids: list[UUID] | None = None, agent: UUID | None = None
    ) -> list[KeyRecord]:
        params: list[object] = []
        where = "true"
        if key_ids is not None:
            where, params = "key_id = ANY(%s)", [key_ids]
        if agent is not None:
            where, params = f"{where} AND agent = %s", [*params, agent]
        with self._datastore.get_connection() as conn:
            rows = conn.execute(
                f"SELECT {_RECORD_COLUMNS} FROM ledger_keys WHERE {where} ORDER BY created_at",
                params,
            ).fetchall()
        return [KeyRecord(**row) for row in rows]

    def destroy(self, key_ids: list[UUID], by: str, reason: str) -> int:
        with self._datastore.get_connection() as conn:
            destroyed = conn.execute(
                "UPDATE ledger_keys SET key = NULL, destroyed_at = now(), destroyed_by = %s,"
                " reason = %s WHERE key_id = ANY(%s) AND key IS NOT NULL",
                (by, reason, key_ids),
            ).rowcount
        for key_id in key_ids:
            self._cache[key_id] = (None, time.monotonic())
        with psycopg.connect(**connect_kwargs(self._datastore), autocommit=True) as conn:
            conn.execute("VACUUM ledger_keys")
        return destroyed

    def _cached(self, key_id: UUID) -> bytes | None:
        key, read_at = self._cache.get(key_id, (None, 0.0))
        return key if key is not None and time.monotonic() - read_at < LIVE_FOR_S else None

    def _destroyed(self, key_id: UUID) -> bool:
        return key_id in self._cache and self._cache[key_id][0] is None

    def _remember(self, key_id: UUID, key: Any) -> bytes | None:
        value = None if key is None else bytes(key)
        self._cache[key_id] = (value, time.monotonic())
        return value
