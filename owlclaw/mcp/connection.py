"""One MCP server's connection on a host: started on first use, supervised, closed with the host.

A task of its own holds the SDK's ``Client`` open (its transport's task group lives in that
task): it connects, lists the server's tools, then waits — for a ``tools/list_changed``
notification (the list is fetched again), for the connection to be found lost (a call saw it
closed: the server process died, the HTTP session failed), or for close. The calls in flight
on a lost connection get ``MCP_SERVER_UNAVAILABLE`` (retryable); it is started again, and the
next calls wait for that (each up to its time limit). A server that cannot be reached is tried
again after a backoff that doubles up to ``RESTART_MAX_S``, or at once when a call needs it; a
call it fails for gets ``MCP_SERVER_UNAVAILABLE`` with why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from importlib.metadata import version as package_version
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from owlclaw.mcp.config import McpServer
from owlclaw.mcp.tools import McpTool, discovered
from owlclaw.tools.errors import ToolError

log = logging.getLogger("owlclaw.mcp")

UNAVAILABLE = "MCP_SERVER_UNAVAILABLE"
RESTART_INITIAL_S, RESTART_MAX_S = 0.2, 30.0
LIST_PAGES = 100
"""At most this many pages of a server's tool list (a paginator that never ends cannot hang)."""
CLOSE_S = 10.0
CLIENT_INFO = types.Implementation(name="owlclaw", version=package_version("owlclaw"))
"""How OwlClaw introduces itself to a server (initialize's clientInfo)."""
State = Literal["starting", "ready", "unavailable", "closed"]


class McpConnection:
    """The connection to the server ``name`` with settings ``server``."""

    def __init__(self, name: str, server: McpServer):
        self.name = name
        self.server = server
        self.state: State = "starting"
        self.reason = ""
        """Why the server is unavailable (its last start or connection failure)."""
        self.tools: dict[str, McpTool] = {}
        """Its tools the app takes, by OwlClaw name, as last listed (kept while it restarts)."""
        self.skipped: dict[str, str] = {}
        """Its tools the app did not exclude but cannot use, with why."""
        self.info: types.Implementation | None = None
        self.starts = 0
        self.refreshes = 0
        """How many times a tools/list_changed notification had the list fetched again."""
        self._client: Client | None = None
        self._settled = asyncio.Event()
        """Set when a caller has nothing to wait for (ready, or it could not start); clear while
        it starts, or restarts after it was lost or a call asked to try again."""
        self._wake = asyncio.Event()
        self._lost = False
        self._changed = False
        self._retry = False
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start connecting (once); the connection is then kept up until ``close``."""
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def settled(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the server is ready or known unavailable."""
        self.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._settled.wait()

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> types.CallToolResult | ToolError:
        """The server's result, or MCP_SERVER_UNAVAILABLE when it cannot be reached or the
        connection is lost while the call runs (the connection then restarts)."""
        if self.state == "unavailable" and self._client is None:
            self._retry_now()
        await self.settled(timeout_s)
        client = self._client
        if client is None:
            return self._unavailable(self.reason or "the server is starting")
        try:
            return await client.call_tool(tool, arguments)  # bounded by the pipeline
        except MCPError as e:
            if e.code != types.CONNECTION_CLOSED:
                raise
            self.lose(client, f"the connection closed during the call: {e}")
            return self._unavailable(self.reason)

    def lose(self, client: Client, reason: str) -> None:
        """The connection of ``client`` is gone: restart it (once, however many calls saw it)."""
        if client is self._client and not self._lost:
            log.warning("MCP server %s: %s", self.name, reason)
            self.reason = reason
            self._client = None
            self.state = "unavailable"
            self._settled.clear()  # the next calls wait for the restart
            self._lost = True
            self._wake.set()

    def _retry_now(self) -> None:
        """A call to a server that could not be reached: try it again now (not after the rest
        of its backoff), and have the call wait for that attempt."""
        self._retry = True
        self._settled.clear()
        self._wake.set()

    def _unavailable(self, reason: str) -> ToolError:
        return ToolError(
            error=f"MCP server {self.name!r} is unavailable: {reason}",
            error_code=UNAVAILABLE,
            kind="system",
            retryable=True,
        )

    async def close(self) -> None:
        self._closing = True
        self.state = "closed"
        self._wake.set()
        if self._task is not None:
            try:
                async with asyncio.timeout(CLOSE_S):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task

    async def _supervise(self) -> None:
        backoff = RESTART_INITIAL_S
        was_ready = True  # so that the first start is "starting", as a restart after a loss
        while not self._closing:
            if was_ready:  # after a failed start it stays unavailable, with why, until it starts
                self._settled.clear()
                self.state = "starting"
            self.starts += 1
            was_ready, self._retry = False, False
            try:
                async with self._connected() as client:
                    await self._list(client)
                    self._client, self.state, self.reason = client, "ready", ""
                    self._lost = False
                    self._settled.set()
                    was_ready, backoff = True, RESTART_INITIAL_S
                    await self._serve(client)
            except Exception as e:  # the server cannot start, or failed: say why, try again
                self.reason = describe(e)
                log.warning("MCP server %s is unavailable: %s", self.name, self.reason)
            self._client = None
            if self._closing:
                break
            self.state = "unavailable"
            if not was_ready:  # it cannot start: callers are told so until it can
                self._settled.set()
            # else it was lost: callers wait (each up to its time limit) for the restart
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    while not (self._closing or self._retry):  # a close or a call ends it
                        self._wake.clear()
                        await self._wake.wait()
            backoff = min(backoff * 2, RESTART_MAX_S)
        self._settled.set()

    async def _serve(self, client: Client) -> None:
        """Until the connection is lost or closed, fetch the tool list again when it changes."""
        while not (self._lost or self._closing):
            await self._wake.wait()
            self._wake.clear()
            if self._changed and not (self._lost or self._closing):
                self._changed = False
                try:
                    await self._list(client)
                except MCPError as e:
                    self.lose(client, f"listing its tools failed: {e}")
                self.refreshes += 1

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        server = self.server
        async with contextlib.AsyncExitStack() as stack:
            target: Any
            if server.command is not None:
                target = StdioServerParameters(
                    command=server.command, args=list(server.args), env=dict(server.env) or None
                )
            else:
                assert server.url is not None
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=headers(server),
                        timeout=httpx2.Timeout(server.connect_timeout_s, read=300.0),
                    )
                )
                target = streamable_http_client(server.url, http_client=http)
            client = Client(
                target,
                message_handler=self._on_message,
                client_info=CLIENT_INFO,
                cache=None,  # every listing is the server's current one
            )
            async with asyncio.timeout(server.connect_timeout_s):
                await stack.enter_async_context(client)
            yield client

    async def _list(self, client: Client) -> None:
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.info = client.server_info
        self.tools, self.skipped = discovered(self.name, self.server, listed, self.info, self)

    async def _on_message(self, message: Any) -> None:
        """Server notifications: a changed tool list is fetched again (by the connection's
        task: a request cannot be awaited from inside the session's receive loop)."""
        if isinstance(message, types.ToolListChangedNotification):
            self._changed = True
            self._wake.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s: %s", self.name, describe(message))


def headers(server: McpServer) -> dict[str, str]:
    """The HTTP headers of ``headers_env``, read from the environment now; a variable that is
    not set is an error naming it (not its value)."""
    missing = [var for var in server.headers_env.values() if var not in os.environ]
    if missing:
        raise LookupError(f"environment variable {', '.join(missing)} is not set (headers_env)")
    return {header: os.environ[var] for header, var in server.headers_env.items()}


def describe(error: BaseException) -> str:
    """One line naming what failed; the first error of a group (anyio's task groups wrap)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"[:500]
