"""The MCP endpoint and the A2A agents in the webhook's app, each built on its first request.

Their SDKs take a second or more each to import: a server that nobody asks over MCP or A2A
should not pay that before it serves. The first request builds the ASGI app in a daemon thread
(``owlclaw.background``; concurrent first requests wait for the same build) and starts what runs
beside it (MCP's session manager), until the aiohttp app's cleanup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from aiohttp import web
from aiohttp_asgi import ASGIResource

from owlclaw.a2a.paths import PREFIX as A2A_PREFIX
from owlclaw.background import load_in_background
from owlclaw.server.service import Service

MCP_PATH = "/mcp"

ASGIApp = Callable[[Any, Any, Any], Any]
Built = tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[Any]] | None]
"""An ASGI app and what must run while it serves (None: nothing)."""


class OnFirstRequest:
    """An ASGI app that ``build`` makes on the first request."""

    def __init__(self, build: Callable[[], Built], name: str):
        self._build = build
        self._name = name
        self._app: asyncio.Task[ASGIApp] | None = None
        self._beside: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            self._app = asyncio.create_task(self._built())
        app = await asyncio.shield(self._app)
        await app(scope, receive, send)

    async def _built(self) -> ASGIApp:
        app, beside = await asyncio.wrap_future(load_in_background(self._build, self._name))
        if beside is not None:
            started = asyncio.Event()
            self._beside = asyncio.create_task(self._run(beside, started))
            waiting = asyncio.create_task(started.wait())
            await asyncio.wait([self._beside, waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if self._beside.done():
                self._beside.result()  # its error, if it ended before serving
        return app

    async def _run(
        self, beside: Callable[[], AbstractAsyncContextManager[Any]], started: asyncio.Event
    ) -> None:
        async with beside():
            started.set()
            await self._closing.wait()

    async def close(self, _: web.Application) -> None:
        """Stop what runs beside the app, if a request built it (a build under way is
        abandoned: its thread ends on its own)."""
        self._closing.set()
        if self._app is not None and not self._app.done():
            self._app.cancel()
        if self._beside is not None:
            await self._beside


def mount(app: web.Application, root_path: str, build: Callable[[], Built], name: str) -> None:
    """Serve what ``build`` makes under ``root_path`` of ``app`` (behind its middlewares)."""
    lazy = OnFirstRequest(build, name)
    app.router.register_resource(ASGIResource(lazy, root_path=root_path))
    app.on_cleanup.append(lazy.close)


def mount_mcp(app: web.Application, service: Service) -> None:
    """MCP over streamable HTTP at ``/mcp`` (``owlclaw.server.mcp_server``)."""

    def build() -> Built:
        from owlclaw.server import mcp_server

        return mcp_server.asgi(service)

    mount(app, MCP_PATH, build, "mcp-server")


def mount_a2a(app: web.Application, service: Service) -> None:
    """Each served agent as an A2A agent under ``/a2a`` (``owlclaw.a2a.routes``)."""
    base_url = f"http://{service.config.server.host}:{service.config.server.port}"

    def build() -> Built:
        from owlclaw.a2a.routes import a2a_app

        return a2a_app(service, service.apps, base_url), None

    mount(app, A2A_PREFIX, build, "a2a-routes")
