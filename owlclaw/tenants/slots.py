"""Slots of a tenant's concurrent runs: a run holds one while it runs, and waits (queued, its
RunQueued recorded) while none is free; a parked run has given its slot back.

PostgreSQL: a tenant's N slots are N session advisory locks, ``(key of the tenant, slot)``,
taken with ``pg_try_advisory_lock`` on one connection of this process, so the cap holds across
processes and nodes, and a process that dies gives its slots back with its connection. A
waiting run polls with backoff. The in-memory ledger (one process): a semaphore per tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import psycopg

from owlclaw.tenants.match import Tenant

log = logging.getLogger(__name__)

FIRST_WAIT_S = 0.05
LONGEST_WAIT_S = 1.0
"""A waiting run polls for a free slot after these delays (doubling, with jitter)."""


class Slots(Protocol):
    def hold(self, tenant: Tenant) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot of ``tenant`` for as long as the context lasts (waits for a free one)."""
        ...


def tenant_key(tenant: Tenant) -> int:
    """The first key of the tenant's slot locks: 32 bits of a hash of its name."""
    digest = hashlib.sha256(b"owlclaw-tenant:" + tenant.name.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class LocalSlots:
    """Slots of one process (the in-memory ledger)."""

    def __init__(self) -> None:
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def hold(self, tenant: Tenant) -> AsyncIterator[None]:
        cap = tenant.config.max_concurrent_runs
        if cap is None:
            yield
            return
        async with self._semaphores.setdefault(tenant.name, asyncio.Semaphore(cap)):
            yield


class PostgresSlots:
    """Slots as advisory locks on one connection of this process (``connect`` opens it)."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]):
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self._generation = 0
        """Counts connections: a slot of a lost connection is not unlocked on the next."""
        self._held: set[tuple[str, int]] = set()
        """The slots this process holds (a session may take its own lock again: never try)."""
        self._lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def hold(self, tenant: Tenant) -> AsyncIterator[None]:
        cap = tenant.config.max_concurrent_runs
        if cap is None:
            yield
            return
        wait = FIRST_WAIT_S
        while (taken := await asyncio.to_thread(self._take, tenant, cap)) is None:
            await asyncio.sleep(wait * random.uniform(0.5, 1.0))
            wait = min(wait * 2, LONGEST_WAIT_S)
        try:
            yield
        finally:
            await asyncio.shield(asyncio.to_thread(self._give_back, tenant, *taken))

    def close(self) -> None:
        with self._lock:
            self._reset()

    def _take(self, tenant: Tenant, cap: int) -> tuple[int, int] | None:
        """(slot, generation) of a slot taken now; None when all are held."""
        with self._lock:
            try:
                conn = self._connection()
                for slot in range(cap):
                    if (tenant.name, slot) in self._held:
                        continue
                    row = conn.execute(
                        "SELECT pg_try_advisory_lock(%s, %s)", (tenant_key(tenant), slot)
                    ).fetchone()
                    if row is not None and row[0]:
                        self._held.add((tenant.name, slot))
                        return slot, self._generation
            except psycopg.OperationalError as e:  # its locks went with it: start over
                log.warning("tenant slots: the connection failed (%s); reconnecting", e)
                self._reset()
            return None

    def _give_back(self, tenant: Tenant, slot: int, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._conn is None:
                return
            self._held.discard((tenant.name, slot))
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (tenant_key(tenant), slot))
            except psycopg.OperationalError:
                self._reset()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            self._generation += 1
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._held.clear()
