"""The ``[mcp.servers.<name>]`` tables of an app's owlclaw.toml: which MCP servers the agent
takes tools from, and how to reach each (a command over stdio, or a streamable-HTTP URL).

Strict like the rest of owlclaw.toml: an unknown field, both or neither of ``command`` and
``url``, or a server name that cannot prefix a tool name is an AppError naming the server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from owlclaw.app import AppError
from owlclaw.struct_errors import describe

SEPARATOR = "__"
"""Between the server's name and its tool's in an OwlClaw tool name."""
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
"""Letters, digits, '-' and single '_' (two would be the separator)."""
SERVER_NAME_CHARS = 32
"""So that ``<server>__<tool>`` leaves room for the tool's name in the model's 64."""


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP)."""

    command: str | None = None
    """The program that serves MCP over its stdin/stdout (started by the host, not a shell)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    """Environment variables for the command, over a minimal inherited set (PATH, HOME...)."""
    url: str | None = None
    """An http(s) URL serving MCP over streamable HTTP."""
    headers_env: dict[str, str] = {}
    """HTTP header name -> the environment variable holding its value, read at connect time
    (so a token is never in owlclaw.toml, the ledger or a trace)."""
    include: tuple[str, ...] = ("*",)
    """Globs of the server's tool names the agent gets."""
    exclude: tuple[str, ...] = ()
    """Globs of the server's tool names the agent does not get (wins over ``include``)."""
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """A call's time limit."""
    connect_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """How long the server has to start and answer the handshake, and a run waits for that:
    apart from ``timeout_s``, as a server run by npx or uvx may take seconds to start."""

    @property
    def key(self) -> str:
        """What identifies this server's connection on a host: its settings (two apps that
        name different servers alike get two connections)."""
        return hashlib.sha256(msgspec.json.encode(self, order="sorted")).hexdigest()


class McpTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    servers: dict[str, McpServer] = {}


def mcp_servers(config: Mapping[str, Any], source: str = "owlclaw.toml") -> dict[str, McpServer]:
    """The app's MCP servers by name; AppError naming ``source`` and the server when one is
    misconfigured."""
    table = config.get("mcp", {})
    try:
        mcp = msgspec.convert(table, McpTable)
    except msgspec.ValidationError as e:
        raise AppError(f"{source}: {describe(e, McpTable, table, 'mcp')}") from e
    for name, server in mcp.servers.items():
        check_server(name, server, source)
    return dict(mcp.servers)


def check_server(name: str, server: McpServer, source: str) -> None:
    where = f"{source}: [mcp.servers.{name}]"
    if not SERVER_NAME.match(name) or name.endswith("_") or len(name) > SERVER_NAME_CHARS:
        raise AppError(
            f"{where}: the server name prefixes its tools' names ({name}{SEPARATOR}<tool>): "
            f"use 1-{SERVER_NAME_CHARS} letters, digits, '-' or single '_', starting with a "
            "letter or digit"
        )
    if (server.command is None) == (server.url is None):
        raise AppError(f"{where}: set exactly one of command (stdio) or url (streamable HTTP)")
    if server.url is not None:
        if not server.url.startswith(("http://", "https://")):
            raise AppError(f"{where}: url must be an http:// or https:// URL, got {server.url!r}")
        if server.args or server.env:
            raise AppError(f"{where}: args and env are for a command; this server has a url")
    if server.command is not None and server.headers_env:
        raise AppError(f"{where}: headers_env is for a url; this server has a command")
