"""The embedded PostgreSQL runs with the connection budget's max_connections."""

from __future__ import annotations

import os

import psycopg
import pytest

from owlclaw.connections import MAX_CONNECTIONS
from owlclaw.database import Database

pytestmark = pytest.mark.integration


def test_the_embedded_server_accepts_the_budgets_connections(pg_server: Database) -> None:
    if os.environ.get("OWLCLAW_DATABASE_URL"):
        pytest.skip("an external server keeps its own max_connections")
    with psycopg.connect(pg_server.url) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    assert row is not None and int(row[0]) == MAX_CONNECTIONS
