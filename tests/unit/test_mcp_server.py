"""The MCP server's own logic, without a started service: the tools' schemas as a client lists
them (in process, through the SDK's client), refusals as tool errors, the caller's traceparent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import TextContent

from owlclaw.config import OwlClawConfig
from owlclaw.server.mcp_server import make_server, refused_as, traceparent
from owlclaw.server.service import NotServed, Service

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def with_client(then: Any) -> Any:
    """``then(client)`` against the MCP server of a service that serves no agent (not started:
    a refusal comes before anything started is needed)."""

    async def main() -> Any:
        async with Client(make_server(Service(OwlClawConfig(), []))) as client:
            return await then(client)

    return asyncio.run(main())


def test_the_tools_take_what_their_callers_give() -> None:
    async def schemas(client: Client) -> dict[str, dict[str, Any]]:
        return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    found = with_client(schemas)
    assert set(found["trigger_run"]["properties"]) == {"agent_id", "focus", "payload", "wait"}
    assert found["trigger_run"]["required"] == ["agent_id"]
    assert found["answer_approval"]["properties"]["decision"]["enum"] == ["approve", "deny"]
    k = found["recall_memories"]["properties"]["k"]
    assert (k["minimum"], k["maximum"], k["default"]) == (1, 20, 5)
    assert set(found["read_timeline"]["properties"]) == {"agent_id", "run_no", "run_id"}


def test_an_agent_not_served_is_a_tool_error_with_its_message() -> None:
    async def trigger(client: Client) -> Any:
        return await client.call_tool("trigger_run", {"agent_id": "nobody"})

    result = with_client(trigger)
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    assert content.text == "Error executing tool trigger_run: agent 'nobody' is not served here"


def test_a_refusal_becomes_the_given_error_and_anything_else_goes_through() -> None:
    with pytest.raises(ToolError, match=r"^agent 'x' is not served here$"), refused_as(ToolError):
        raise NotServed("x")
    with pytest.raises(RuntimeError), refused_as(ToolError):
        raise RuntimeError("a bug, not a refusal")


@pytest.mark.parametrize(
    ("meta", "headers", "kept"),
    [
        ({"traceparent": TRACEPARENT}, {"traceparent": "00-other"}, TRACEPARENT),
        (None, {"traceparent": TRACEPARENT}, TRACEPARENT),
        ({}, None, None),
        ({"traceparent": "x" * 257}, None, None),
        ({"traceparent": "00-\n"}, None, None),
        ({"traceparent": 7}, None, None),
    ],
)
def test_the_callers_traceparent_comes_from_meta_then_the_header(
    meta: dict[str, Any] | None, headers: dict[str, str] | None, kept: str | None
) -> None:
    assert traceparent(meta, headers) == kept
