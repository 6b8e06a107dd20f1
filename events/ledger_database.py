"""The PostgreSQL side of a ledger (``ledger.database``): what the views' tracking recorders,
timers and benches need of the database itself (LISTEN, its pool, sizes and counts). Every
method raises NoDatabase for a ledger held in memory, so code that needs a database says so
where it asks."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Identifier

from events.catalog import LedgerEvent
from events.codec import topic_of
from events.ledger_store import LedgerStore
from events.memory_recorder import InMemoryRecorder
from events.postgres import drop_dead_connections, listening
from events.recorder import OwlClawApplicationRecorder


class LedgerDatabase:
    """The ledger's PostgreSQL database: notifications, its connection pool, counts."""

    def __init__(self, store: LedgerStore):
        self._store = store

    def listen(self, channel: str | None = None) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection of its own (outside the pool) LISTENing on ``channel`` (by default the
        one appends are announced on, ``notify_channel``): wait on it with ``notifies``."""
        return listening(self.datastore, channel or self.notify_channel)

    @property
    def notify_channel(self) -> str:
        """The PostgreSQL channel appends are announced on (LISTEN to wait for new events)."""
        return self._store.postgres().channel_name

    @property
    def datastore(self) -> PostgresDatastore:
        """The recorder's datastore (its connection pool), which the views' tracking recorders
        share (``events.tracking``)."""
        return self._store.postgres().datastore

    def drop_dead_connections(self) -> None:
        """Replace the pool's dead connections now (``events.postgres.drop_dead_connections``):
        after a call met the database away, so the next one gets a live connection."""
        drop_dead_connections(self.datastore)

    def size(self) -> int:
        """The size of the ledger's database in bytes (its log and the views' tables)."""
        with self.datastore.get_connection() as conn:
            row = conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()
        return int(row["b"]) if row else 0

    def count_events(self, types: Sequence[type[LedgerEvent]]) -> int:
        """How many events of ``types`` the log holds."""
        recorder = self._store.postgres()
        with recorder.datastore.get_connection() as conn:
            row = conn.execute(
                SQL("SELECT count(*) AS n FROM {} WHERE topic = ANY(%s)").format(
                    Identifier(recorder.events_table_name)
                ),
                ([topic_of(t) for t in types],),
            ).fetchone()
        return int(row["n"]) if row else 0

    def stream_commits(self, stream: UUID) -> int:
        """How many transactions committed ``stream``'s events (commits per step, in benches)."""
        recorder = self._store.postgres()
        with recorder.datastore.get_connection() as conn:
            row = conn.execute(
                SQL(
                    "SELECT count(DISTINCT transaction_id) AS n FROM {} WHERE originator_id = %s"
                ).format(Identifier(recorder.events_table_name)),
                (stream,),
            ).fetchone()
        return int(row["n"]) if row else 0

    @property
    def recorder(self) -> OwlClawApplicationRecorder | InMemoryRecorder:
        """The underlying eventsourcing recorder (in memory too), for tests that store raw
        rows (old event versions, unknown types). Other code uses the ledger's API."""
        return self._store.recorder
