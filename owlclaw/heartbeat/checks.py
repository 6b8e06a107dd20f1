"""Checking an app's heartbeat sources at each beat, all at once, each within its time limit.

A SQL source connects, counts in a read-only transaction (one statement, with the source's
timeout as its statement timeout) and disconnects. A LISTEN source holds one connection that
LISTENs from ``start`` on, and counts what arrived since the last beat. A source that fails or
times out answers with its error: it wakes nothing, and holds up no other source.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections import deque
from collections.abc import Coroutine, Mapping
from decimal import Decimal
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from owlclaw.heartbeat.config import HeartbeatSources, ListenSource, SqlSource
from owlclaw.heartbeat.wake import PAYLOAD_CHARS, PAYLOADS_KEPT, SourceResult

T = TypeVar("T")


class NotACount(ValueError):
    """A SQL source's query answered something other than a whole number."""


async def count_rows(url: str, query: str, timeout_s: float) -> int:
    """The first column of ``query``'s first row (no row or NULL: 0), read in a read-only
    transaction with ``timeout_s`` as its statement timeout. The query goes over the extended
    protocol, which takes one statement only (no ``; COMMIT; ...`` leaving the transaction)."""
    conn = await psycopg.AsyncConnection.connect(url, connect_timeout=math.ceil(timeout_s))
    async with conn:
        await conn.set_read_only(True)
        await conn.execute(
            "SELECT set_config('statement_timeout', %s, true)", (f"{math.ceil(timeout_s * 1000)}",)
        )
        row = await (await conn.execute(query.strip().rstrip(";"), binary=True)).fetchone()
        await conn.rollback()
    value = row[0] if row else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | Decimal) or value != int(value):
        raise NotACount(f"the query answered {str(value)[:80]!r}, not a count")
    return int(value)


class Listener:
    """One LISTEN connection and the notifications received since the last ``take``."""

    def __init__(self, url: str, channel: str, timeout_s: float):
        self.url, self.channel, self.timeout_s = url, channel, timeout_s
        self.count = 0
        self.payloads: deque[str] = deque(maxlen=PAYLOADS_KEPT)
        self._conn: psycopg.AsyncConnection | None = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, connect_timeout=math.ceil(self.timeout_s)
        )
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        self._reader = asyncio.create_task(self._read(conn))

    async def _read(self, conn: psycopg.AsyncConnection) -> None:
        async for note in conn.notifies():
            self.count += 1
            self.payloads.append(note.payload[:PAYLOAD_CHARS])

    async def take(self) -> tuple[int, list[str]]:
        """What arrived since the last take. A lost connection raises its error (what it had
        received waits for the next take), and the next take connects again."""
        if self._reader is not None and self._reader.done():
            error = self._reader.exception() if not self._reader.cancelled() else None
            await self.close()
            raise ConnectionError(f"the LISTEN connection was lost: {error}")
        if self._conn is None:
            await self.connect()
        taken = self.count, list(self.payloads)
        self.count = 0
        self.payloads.clear()
        return taken

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
        self._conn = self._reader = None


class SourceChecks:
    """The sources of one agent, checked together at each beat."""

    def __init__(self, sources: HeartbeatSources, environ: Mapping[str, str] = os.environ):
        self.sources = sources
        self.urls = {name: environ.get(var, "") for name, var in sources.url_envs.items()}
        self.listeners = {
            name: Listener(self.urls[name], source.channel, sources.timeouts[name])
            for name, source in sources.sources.items()
            if isinstance(source, ListenSource)
        }

    async def start(self) -> None:
        """Start listening, so that the first beat counts what arrived since; a listener that
        cannot connect now tries again at the beat, which reports its error."""
        await asyncio.gather(
            *(
                self._bounded(name, listener.take())
                for name, listener in self.listeners.items()
                if self.urls[name]
            )
        )

    async def check(self) -> list[SourceResult]:
        """Every source's answer, in the order of the app's table."""
        return list(await asyncio.gather(*(self._check(name) for name in self.sources.sources)))

    async def close(self) -> None:
        for listener in self.listeners.values():
            await listener.close()

    async def _check(self, name: str) -> SourceResult:
        source = self.sources.sources[name]
        if not self.urls[name]:  # libpq would take an empty URL for its defaults: refused
            return SourceResult.failed(name, source.kind, f"{self.sources.url_envs[name]} is unset")
        if isinstance(source, SqlSource):
            timeout_s = self.sources.timeouts[name]
            counted = await self._bounded(
                name, count_rows(self.urls[name], source.query, timeout_s)
            )
            if isinstance(counted, str):
                return SourceResult.failed(name, "sql", counted)
            return SourceResult(source=name, kind="sql", count=counted)
        taken = await self._bounded(name, self.listeners[name].take())
        if isinstance(taken, str):
            return SourceResult.failed(name, "listen", taken)
        count, payloads = taken
        return SourceResult(source=name, kind="listen", count=count, payloads=payloads)

    async def _bounded(self, name: str, work: Coroutine[Any, Any, T]) -> T | str:
        """``work``'s result within the source's time limit, or its error as text."""
        timeout_s = self.sources.timeouts[name]
        try:
            return await asyncio.wait_for(work, timeout_s)
        except TimeoutError:
            return f"timed out after {timeout_s:g} s"
        except (psycopg.Error, OSError, NotACount) as e:
            first = (str(e).strip().splitlines() or [""])[0]
            return f"{type(e).__name__}: {first}"
