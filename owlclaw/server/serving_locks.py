"""Which live server serves which agent: a PostgreSQL session advisory lock per served agent.

Fencing keeps an agent's ledger consistent whoever writes it, but two ``owlclaw run`` processes
serving one agent each host it (two hosts, two sets of timers and heartbeats), and nobody is
told. So a server takes a lock per agent on a connection of its own, named after itself
(``application_name``): a second server finds the lock taken and is refused with the holder's
address and pid, read from ``pg_stat_activity``. PostgreSQL releases the locks when their
holder's connection ends, so a killed server leaves nothing to clean up.

Servers that join the same configured Ray cluster share its agents (one actor per agent in
that cluster): they take the lock shared and refuse only a holder on another cluster.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence

import psycopg

log = logging.getLogger(__name__)

APPLICATION_NAME_MAX = 63
"""PostgreSQL keeps this many bytes of an ``application_name`` (NAMEDATALEN - 1)."""
CLUSTER_MARK = " ray "


class AlreadyServed(RuntimeError):
    """Another live server serves the agent."""

    def __init__(self, agent_id: str, holder: str):
        super().__init__(agent_id, holder)
        self.agent_id = agent_id
        self.holder = holder

    def __str__(self) -> str:
        return f"agent {self.agent_id!r} is already served by {self.holder}"


def lock_key(agent_id: str) -> int:
    """The agent's advisory lock: 64 bits of a hash, so no two agent ids meet in practice."""
    digest = hashlib.sha256(b"owlclaw-serves:" + agent_id.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def server_name(host: str, port: int, cluster: str | None = None) -> str:
    """How this server names itself to PostgreSQL, and so to a second server."""
    name = f"owlclaw run {host}:{port} pid {os.getpid()}"
    if cluster is not None:
        name += CLUSTER_MARK + cluster
    return name.encode()[:APPLICATION_NAME_MAX].decode(errors="ignore")


class ServingLocks:
    """The served agents' locks, held on one connection for as long as the server serves."""

    def __init__(self, url: str, name: str, agent_ids: Sequence[str], *, shared: bool = False):
        self.url = url
        self.name = name
        self.agent_ids = list(agent_ids)
        self.shared = shared
        """Taken shared: the servers of one Ray cluster serve its agents together."""
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def acquire(self) -> None:
        """Take every agent's lock, or none: raises AlreadyServed naming the holder."""
        conn = psycopg.connect(self.url, autocommit=True, application_name=self.name)
        try:
            for agent_id in self.agent_ids:
                self._take(conn, agent_id)
        except BaseException:
            _close(conn)  # releases the locks taken so far
            raise
        self._conn = conn

    def _take(self, conn: psycopg.Connection[tuple[object, ...]], agent_id: str) -> None:
        key = lock_key(agent_id)
        take = "pg_try_advisory_lock_shared" if self.shared else "pg_try_advisory_lock"
        row = conn.execute(f"SELECT {take}(%s)", (key,)).fetchone()
        if row is not None and row[0] and not self.shared:
            return  # an exclusive lock granted: nobody else holds it
        others = _holders(conn, key)
        if row is None or not row[0]:
            raise AlreadyServed(agent_id, others[0] if others else "another server")
        mine = _cluster_of(self.name)
        foreign = [other for other in others if _cluster_of(other) != mine]
        if foreign:  # taken shared by a server of another cluster
            raise AlreadyServed(agent_id, foreign[0])

    def check(self) -> None:
        """Hold the locks through a restart of the database: a dead connection lost them, so
        take them again on a new one (AlreadyServed if another server took one meanwhile)."""
        if self._conn is not None and not self._conn.closed:
            try:
                self._conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                self._conn.close()
        log.warning("the database connection holding the serving locks was lost; retaking")
        self.acquire()

    def release(self) -> None:
        if self._conn is not None:
            _close(self._conn)
            self._conn = None


def _close(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Unlock, then close: a closed connection's backend drops its locks only when it has
    exited, after ``close`` returns, so a server started right after would find them held."""
    try:
        conn.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        pass  # a lost connection holds nothing any more
    finally:
        conn.close()


def _holders(conn: psycopg.Connection[tuple[object, ...]], key: int) -> list[str]:
    """The other sessions holding the lock, by the names their servers gave them."""
    rows = conn.execute(
        "SELECT a.application_name, a.client_addr FROM pg_locks l"
        " JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND l.classid = %s AND l.objid = %s AND l.pid <> pg_backend_pid()",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    ).fetchall()
    return [str(name) or f"a session from {addr}" for name, addr in rows]


def _cluster_of(name: str) -> str | None:
    _, mark, cluster = name.partition(CLUSTER_MARK)
    return cluster if mark else None
