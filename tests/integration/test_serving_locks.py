"""One live server per agent: the serving locks on the real PostgreSQL (released with their
connection, however it ends), and ``owlclaw run`` of an app that another server already serves,
refused with that server's address and pid."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from owlclaw.bench import free_port
from owlclaw.database import Database
from owlclaw.server.serving_locks import AlreadyServed, ServingLocks, server_name
from tests.cli import owlclaw, start_run, user_env

pytestmark = pytest.mark.integration


TERMINATE = (
    "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity WHERE application_name = %s"
)
"""Ends a server's lock connection and waits until its backend has exited, so its locks are
released: without the timeout, pg_terminate_backend only signals the backend, and the next
acquire could still meet its lock (seen in CI)."""


def locks(db: Database, name: str, *agents: str, shared: bool = False) -> ServingLocks:
    held = ServingLocks(db.url, name, agents, shared=shared)
    held.acquire()
    return held


def test_a_second_server_is_refused_naming_the_first(fresh_db: Database) -> None:
    first = locks(fresh_db, server_name("127.0.0.1", 8765), "desk")
    second = ServingLocks(fresh_db.url, server_name("127.0.0.1", 8766), ["other", "desk"])
    with pytest.raises(AlreadyServed) as refused:
        second.acquire()
    assert str(refused.value) == f"agent 'desk' is already served by {first.name}"
    assert first.name.startswith("owlclaw run 127.0.0.1:8765 pid ")
    third = locks(fresh_db, "third", "other")  # the refused server kept none of its locks
    first.release()
    third.release()
    locks(fresh_db, "fourth", "desk").release()  # a stopped server's agents are free


def test_servers_of_one_ray_cluster_share_agents_and_no_other_does(fresh_db: Database) -> None:
    a = locks(fresh_db, server_name("10.0.0.1", 8765, "10.0.0.9:6379"), "desk", shared=True)
    b = locks(fresh_db, server_name("10.0.0.2", 8765, "10.0.0.9:6379"), "desk", shared=True)
    elsewhere = ServingLocks(
        fresh_db.url, server_name("10.0.0.3", 8765, "10.0.7.7:6379"), ["desk"], shared=True
    )
    with pytest.raises(AlreadyServed, match=r"desk.*ray 10\.0\.0\.9:6379"):
        elsewhere.acquire()
    alone = ServingLocks(fresh_db.url, server_name("127.0.0.1", 8765), ["desk"])
    with pytest.raises(AlreadyServed, match=r"10\.0\.0"):
        alone.acquire()
    a.release()
    b.release()
    shared_after = ServingLocks(fresh_db.url, "late", ["desk"], shared=True)
    held = locks(fresh_db, server_name("127.0.0.1", 8765), "desk")
    with pytest.raises(AlreadyServed, match=r"owlclaw run 127\.0\.0\.1:8765"):
        shared_after.acquire()
    held.release()


def test_the_locks_are_taken_again_after_their_connection_is_lost(fresh_db: Database) -> None:
    held = locks(fresh_db, "holder", "desk")
    with psycopg.connect(fresh_db.url, autocommit=True) as admin:
        admin.execute(
            TERMINATE,
            ("holder",),
        )
        held.check()  # a new connection, the lock taken again
        intruder = ServingLocks(fresh_db.url, "intruder", ["desk"])
        with pytest.raises(AlreadyServed, match="holder"):
            intruder.acquire()
        admin.execute(
            TERMINATE,
            ("holder",),
        )
        intruder.acquire()  # between the loss and the next check another server took it
        with pytest.raises(AlreadyServed, match="intruder"):
            held.check()
    intruder.release()


def test_owlclaw_run_of_a_served_app_is_refused_naming_the_server(tmp_path: Path) -> None:
    home = tmp_path / "desk"
    home.mkdir()
    first_port = free_port()
    env = user_env(home / ".owlclaw", first_port, OWLCLAW_PLACEMENT="local")
    assert owlclaw(env, "init", "my-agent", cwd=home).returncode == 0
    server, log = start_run(env, home, "my-agent")
    try:
        assert server.poll() is None, log.read_text()
        second_env = env | {"OWLCLAW_SERVER_PORT": str(free_port())}
        refused = owlclaw(second_env, "run", "my-agent", cwd=home)
    finally:
        server.terminate()
        server.wait(60)
    assert refused.returncode == 2, refused.stderr
    line = f"already served by owlclaw run 127.0.0.1:{first_port} pid {server.pid}"
    assert line in refused.stderr
    assert "Traceback" not in refused.stderr
