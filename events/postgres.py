"""Connections to the ledger's PostgreSQL database outside the recorder's own statements.

The recorder, the tracking recorders of the views, the ledger and the benches all need a
datastore from a URL, a connection outside the pool or the schema lock; these helpers hold no
recorder state, so they live apart from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Identifier

SCHEMA_LOCK_KEY = 0x0C1A_5C4E


@contextmanager
def schema_lock(datastore: PostgresDatastore) -> Iterator[None]:
    """Held while creating tables idempotently: processes starting together take turns, since
    CREATE ... IF NOT EXISTS is not safe against a concurrent creator (duplicate pg_type)."""
    with psycopg.connect(**connect_kwargs(datastore), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))


def drop_dead_connections(datastore: PostgresDatastore) -> None:
    """Check every idle connection of the datastore's pool and replace the dead ones: after a
    call met a dead connection. A restarted server leaves all of them dead, and the pool hands
    out one at a time, so without this each fails one more call of this process long after the
    server is back (a timer delivery retried 4 times met 4 of them). A round trip per idle
    connection, on failure only."""
    with suppress(Exception):  # a pool closed meanwhile: nothing to check
        datastore.pool.check()


def connect_kwargs(datastore: PostgresDatastore) -> dict[str, Any]:
    """psycopg.connect() arguments for a connection outside the datastore's pool."""
    kwargs = datastore.pool.kwargs
    assert isinstance(kwargs, dict)
    return {k: v for k, v in kwargs.items() if k != "row_factory"}


@contextmanager
def listening(datastore: PostgresDatastore, channel: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection outside the datastore's pool, LISTENing on ``channel``."""
    with psycopg.connect(**connect_kwargs(datastore), autocommit=True) as conn:
        conn.execute(SQL("LISTEN {}").format(Identifier(channel)))
        yield conn


def postgres_env(url: str) -> dict[str, str]:
    """eventsourcing's POSTGRES_* settings for a libpq connection string or URL."""
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(url)
    return {
        "POSTGRES_DBNAME": str(p.get("dbname", "postgres")),
        "POSTGRES_HOST": str(p.get("host", "localhost")),
        "POSTGRES_PORT": str(p.get("port", "5432")),
        "POSTGRES_USER": str(p.get("user", "postgres")),
        "POSTGRES_PASSWORD": str(p.get("password", "")),
    }


def datastore_from_url(
    url: str, *, pool_size: int = 5, max_overflow: int = 10
) -> PostgresDatastore:
    """An eventsourcing datastore for a libpq connection string or URL."""
    env = postgres_env(url)
    return PostgresDatastore(
        dbname=env["POSTGRES_DBNAME"],
        host=env["POSTGRES_HOST"],
        port=env["POSTGRES_PORT"],
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"],
        pool_size=pool_size,
        max_overflow=max_overflow,
        idle_in_transaction_session_timeout=5,
    )
