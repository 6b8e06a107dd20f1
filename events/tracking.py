"""Tables kept beside the log in the ledger's database, with the log position they absorbed.

The base of every read model (``projections.View``): an eventsourcing tracking recorder on the
ledger's connection pool, so a model's rows and its tracking position change in one transaction.
A read model reaches the database only through these methods and the ``Ledger``'s; the pool
itself stays inside ``events``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from eventsourcing.postgres import PostgresTrackingRecorder
from psycopg import Connection, Cursor
from psycopg.rows import DictRow

from events.ledger import Ledger
from events.postgres import schema_lock


class LedgerTrackingRecorder(PostgresTrackingRecorder):
    """A tracking recorder in ``ledger``'s database (NoDatabase for the in-memory ledger)."""

    def __init__(self, ledger: Ledger, *, tracking_table_name: str):
        super().__init__(ledger.database.datastore, tracking_table_name=tracking_table_name)
        self.ledger = ledger

    def create_table(self) -> None:
        """Create the tables idempotently, one process at a time (``schema_lock``)."""
        create_tables([self])

    def transaction(self, *, commit: bool = False) -> AbstractContextManager[Cursor[DictRow]]:
        """A cursor in a transaction on a pooled connection: committed on exit when ``commit``,
        else rolled back (a read)."""
        return self.datastore.transaction(commit=commit)

    def connection(self) -> AbstractContextManager[Connection[DictRow]]:
        """A pooled connection in autocommit mode (open a transaction on it if needed)."""
        return self.datastore.get_connection()


def create_tables(recorders: Sequence[LedgerTrackingRecorder]) -> None:
    """Create the tables of recorders on one ledger under one ``schema_lock``: the lock is a
    connection of its own (~7 ms), and a process opens seven views at a time."""
    if not recorders:
        return
    with schema_lock(recorders[0].datastore):
        for recorder in recorders:
            PostgresTrackingRecorder.create_table(recorder)
