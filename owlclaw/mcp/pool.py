"""A host's MCP connections: one per server (per distinct settings), shared by the runs of all
the agents it hosts, started when a run first needs the server and closed with the host.

The MCP SDK is imported with the first connection (a third of a second), not by every process
that hosts agents."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from owlclaw.mcp.config import McpServer

if TYPE_CHECKING:
    from owlclaw.mcp.connection import McpConnection
    from owlclaw.mcp.tools import McpTool


class McpPool:
    def __init__(self) -> None:
        self._connections: dict[tuple[str, str], McpConnection] = {}

    def connection(self, name: str, server: McpServer) -> McpConnection:
        """The connection to ``server`` named ``name`` (made on first use, not yet started)."""
        key = (name, server.key)
        connection = self._connections.get(key)
        if connection is None:
            from owlclaw.mcp.connection import McpConnection

            connection = self._connections[key] = McpConnection(name, server)
        return connection

    async def ready(self, servers: Mapping[str, McpServer]) -> None:
        """Start the connections to ``servers`` not started yet and wait, each at most its
        ``connect_timeout_s``, until every one is ready or known unavailable (a server restarting
        after a failure is not waited for: its tools are unavailable meanwhile)."""
        waits = [
            self.connection(name, server).settled(server.connect_timeout_s)
            for name, server in servers.items()
        ]
        await asyncio.gather(*waits)

    def tools(self, servers: Mapping[str, McpServer]) -> dict[str, McpTool]:
        """The tools of ``servers`` as last listed (none for a server that never started)."""
        tools: dict[str, McpTool] = {}
        for name, server in servers.items():
            tools.update(self.connection(name, server).tools)
        return tools

    def status(self, servers: Mapping[str, McpServer]) -> dict[str, str]:
        """Each server's state for operators: ready with its tools, or why it is unavailable."""
        return {name: describe(self.connection(name, s)) for name, s in servers.items()}

    def connected(self) -> dict[str, str]:
        """Every connection this host has made, by server name, for ``owlclaw status``."""
        return {name: describe(c) for (name, _), c in self._connections.items()}

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections))


def describe(connection: McpConnection) -> str:
    if connection.state == "ready":
        info = connection.info
        server = f"{info.name} {info.version}" if info is not None else "unnamed server"
        skipped = "".join(f"; {t} left out: {why}" for t, why in connection.skipped.items())
        return f"ready ({server}, {len(connection.tools)} tools){skipped}"
    if connection.state == "unavailable":
        return f"unavailable: {connection.reason}"
    return connection.state
