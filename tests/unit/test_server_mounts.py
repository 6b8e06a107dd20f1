"""The MCP and A2A mounts are built on their first request: once for concurrent first requests,
in a thread, with what runs beside the app (MCP's session manager) from then until cleanup."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from owlclaw.server.mounts import Built, OnFirstRequest


def test_concurrent_first_requests_build_once_and_what_runs_beside_stops_at_cleanup() -> None:
    builds: list[str] = []
    beside: list[str] = []
    answered: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        answered.append(scope["path"])

    @asynccontextmanager
    async def manager() -> AsyncIterator[None]:
        beside.append("started")
        yield
        beside.append("stopped")

    def build() -> Built:
        builds.append(threading.current_thread().name)
        return app, manager

    async def scenario() -> None:
        lazy = OnFirstRequest(build, "test-build")
        assert builds == []  # nothing built before a request
        await asyncio.gather(*(lazy({"type": "http", "path": f"/{n}"}, None, None) for n in "ab"))
        assert beside == ["started"]
        await lazy({"type": "http", "path": "/c"}, None, None)
        await lazy.close(web.Application())
        assert beside == ["started", "stopped"]

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert builds == ["test-build"]  # once, in its own thread
    assert sorted(answered) == ["/a", "/b", "/c"]


def test_a_mount_never_asked_closes_without_building() -> None:
    def build() -> Built:
        raise AssertionError("built without a request")

    asyncio.run(OnFirstRequest(build, "unused").close(web.Application()))
