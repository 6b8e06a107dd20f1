"""The MCP server's own logic, without a started service: the tools' schemas as a client lists
them (in process, through the SDK's client), refusals as tool errors, the caller's traceparent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import TextContent

from owlclaw.access.authorize import Principal, bootstrap
from owlclaw.access.caller import calling_as
from owlclaw.access.roles import parse_grant
from owlclaw.config import OwlClawConfig
from owlclaw.server.mcp_server import TOOLS, make_server, refused_as, traceparent
from owlclaw.server.service import NotServed, Service

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
IN, OUT = "acme.bot", "globex.bot"


def with_client(then: Any, principal: Principal | None = None) -> Any:
    """``then(client)`` against the MCP server of a service that serves no agent (not started:
    a refusal comes before anything started is needed), called by ``principal`` (by default the
    server token's)."""

    async def main() -> Any:
        async with Client(make_server(Service(OwlClawConfig(), []))) as client:
            return await then(client)

    with calling_as(principal or bootstrap()):
        return asyncio.run(main())


def error_text(result: Any) -> str:
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


def test_the_tools_take_what_their_callers_give() -> None:
    async def schemas(client: Client) -> dict[str, dict[str, Any]]:
        return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    found = with_client(schemas)
    assert set(found["trigger_run"]["properties"]) == {"agent_id", "focus", "payload", "wait"}
    assert found["trigger_run"]["required"] == ["agent_id"]
    assert found["answer_approval"]["properties"]["decision"]["enum"] == ["approve", "deny"]
    assert set(found["answer_question"]["properties"]) == {"approval_id", "answer", "digest"}
    k = found["recall_memories"]["properties"]["k"]
    assert (k["minimum"], k["maximum"], k["default"]) == (1, 20, 5)
    assert set(found["read_timeline"]["properties"]) == {"agent_id", "run_no", "run_id"}


def test_an_agent_not_served_is_a_tool_error_with_its_message() -> None:
    async def trigger(client: Client) -> Any:
        return await client.call_tool("trigger_run", {"agent_id": "nobody"})

    text = error_text(with_client(trigger))
    assert text == "Error executing tool trigger_run: agent 'nobody' is not served here"


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


def test_every_tool_and_resource_has_an_action() -> None:
    async def names(client: Client) -> set[str]:
        tools = {t.name for t in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
        return tools | {t.name for t in templates}

    found = with_client(names)
    assert found - {"MEMORY.md", "run timeline"} | {"memory_md", "timeline_resource"} == set(TOOLS)


@pytest.mark.parametrize(
    ("grant", "tool", "arguments", "refusal"),
    [
        ("viewer:acme.*", "trigger_run", {"agent_id": IN}, f"operator on agent '{IN}'"),
        ("operator:acme.*", "trigger_run", {"agent_id": OUT}, f"operator on agent '{OUT}'"),
        ("operator", "read_timeline", {"agent_id": IN, "run_no": 1}, f"viewer on agent '{IN}'"),
        ("operator", "recall_memories", {"agent_id": IN, "query": "x"}, f"viewer on agent '{IN}'"),
        ("operator", "list_agents", {}, "viewer on some agent"),
        ("approver", "list_approvals", {}, "viewer on some agent"),
    ],
)  # fmt: skip
def test_a_call_the_principals_roles_do_not_allow_is_a_tool_error_naming_the_role(
    grant: str, tool: str, arguments: dict[str, Any], refusal: str
) -> None:
    async def call(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    text = error_text(with_client(call, Principal("ann", (parse_grant(grant),))))
    assert text.startswith(f"Error executing tool {tool}: ann may not ")
    assert text.endswith(f"it needs role {refusal}")


def test_the_tools_are_listed_to_every_caller() -> None:
    async def names(client: Client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    viewer = Principal("ann", (parse_grant("viewer:acme.*"),))
    assert with_client(names, viewer) == with_client(names)


def test_a_call_outside_an_authenticated_request_fails_closed() -> None:
    async def main() -> Any:
        async with Client(make_server(Service(OwlClawConfig(), []))) as client:
            return await client.call_tool("list_agents", {})

    assert asyncio.run(main()).is_error  # no caller: refused, not served
