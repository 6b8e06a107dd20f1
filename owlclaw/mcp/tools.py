"""An MCP server's tools as OwlClaw tools: ``<server>__<tool>``, with the server's JSON schema
for their arguments, idempotent when the server says so, and identified in the ledger by the
hash of what the server listed and the server's name and version.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol

import jsonschema
import mcp_types as types

from owlclaw.mcp.config import SEPARATOR, McpServer
from owlclaw.mcp.results import converted, payloads, within
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import ToolSource, ToolSpec
from owlclaw.tools.tool import ToolContext

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a model provider accepts as a function name."""


class Calls(Protocol):
    """Where an MCP tool's calls go: its server's connection on this host."""

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> types.CallToolResult | ToolError: ...


def tool_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def selected(server: McpServer, tool: str) -> bool:
    """Whether the app takes the server's tool ``tool`` (by its name on the server)."""
    return any(fnmatchcase(tool, p) for p in server.include) and not any(
        fnmatchcase(tool, p) for p in server.exclude
    )


def schema_sha256(tool: types.Tool) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of the tool's name, description,
    input schema and annotations: what the model and the pipeline relied on."""
    listed = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": (
            tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
            if tool.annotations is not None
            else None
        ),
    }
    canonical = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotent(annotations: types.ToolAnnotations | None) -> bool:
    """A tool the server marks read-only or idempotent may be retried, and run again after a
    crash left its outcome unknown; any other is not repeated (ToolOutcomeUnknown)."""
    return annotations is not None and bool(
        annotations.read_only_hint or annotations.idempotent_hint
    )


def read_only(annotations: types.ToolAnnotations | None) -> bool:
    """Only a tool the server marks read-only runs side by side with the other calls of one
    model response: an idempotent write may still race a read of the same response."""
    return annotations is not None and bool(annotations.read_only_hint)


@dataclass(frozen=True)
class McpTool:
    spec: ToolSpec
    remote: str
    """Its name on the server."""
    calls: Calls

    timeout_s: float
    """Its server's: how long a call may wait for the server to (re)start."""

    async def execute(self, params: Any, ctx: ToolContext) -> Any:
        """The server's result converted (owlclaw.mcp.results), or a ToolError; the pipeline
        bounds the whole call by the same time limit. Its images and binary resources go to the
        ledger's blob store first, within the ledger cap, so the outcome recorded after this
        returns refers only to stored blobs."""
        result = await self.calls.call(self.remote, dict(params), self.timeout_s)
        if isinstance(result, ToolError):
            return result
        cap = ctx.scope.limits.tool_result_ledger_bytes
        stored = {
            await ctx.scope.store_blob(p.data, p.media_type) for p in within(payloads(result), cap)
        }
        return converted(result, stored)


def discovered(
    name: str,
    server: McpServer,
    listed: Iterable[types.Tool],
    info: types.Implementation | None,
    calls: Calls,
) -> tuple[dict[str, McpTool], dict[str, str]]:
    """The app's tools among those the server ``name`` listed, by OwlClaw name, and the ones
    left out that the app did not exclude, with why."""
    tools: dict[str, McpTool] = {}
    skipped: dict[str, str] = {}
    for tool in listed:
        if not selected(server, tool.name):
            continue
        owl = tool_name(name, tool.name)
        if not TOOL_NAME.match(owl):
            skipped[tool.name] = f"{owl!r} is not a valid tool name for a model"
            continue
        if tool.execution is not None and tool.execution.task_support == "required":
            skipped[tool.name] = "it runs only as an MCP task, which OwlClaw does not call"
            continue
        source = ToolSource(
            schema_sha256(tool),
            info.name if info is not None else "",
            info.version if info is not None else "",
        )
        try:
            spec = ToolSpec(
                owl,
                tool.description or tool.title or tool.name,
                json_schema=tool.input_schema,
                idempotent=idempotent(tool.annotations),
                parallel_safe=read_only(tool.annotations),
                timeout_s=server.timeout_s,
                category="mcp",
                source=source,
            )
        except jsonschema.SchemaError as e:
            skipped[tool.name] = f"its input schema is not a valid JSON schema: {e.message}"
            continue
        tools[owl] = McpTool(spec, tool.name, calls, server.timeout_s)
    return tools, skipped
