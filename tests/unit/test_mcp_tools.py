"""An MCP server's tools as OwlClaw tools: names, include/exclude globs, the JSON schema as the
arguments' check, the schema hash, annotations deciding idempotency, and results."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import mcp_types as types
import msgspec
import pytest
from eventsourcing.persistence import StoredEvent

from events import Ledger, UnknownBlob
from events import catalog as ev
from events.codec import MsgspecMapper
from events.run import Run
from owlclaw.config import RuntimeConfig
from owlclaw.mcp.config import McpServer
from owlclaw.mcp.results import Payload, converted, payloads, within
from owlclaw.mcp.tools import discovered, idempotent, schema_sha256, selected
from owlclaw.tools.errors import ToolError
from tests.tool_context import tool_context

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number", "minimum": 0}},
    "required": ["a", "b"],
}
INFO = types.Implementation(name="calc-server", version="1.2.3")


class NoCalls:
    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> types.CallToolResult | ToolError:
        raise AssertionError("not called here")


def listed(name: str = "add", **fields: Any) -> types.Tool:
    return types.Tool(name=name, description="Add two numbers.", input_schema=SCHEMA, **fields)


def tools_of(server: McpServer, *tools: types.Tool) -> tuple[dict[str, Any], dict[str, str]]:
    return discovered("calc", server, tools, INFO, NoCalls())


def test_a_tool_is_named_after_its_server_and_carries_its_schema() -> None:
    tools, skipped = tools_of(McpServer(command="x", timeout_s=7), listed())
    spec = tools["calc__add"].spec
    assert skipped == {}
    assert spec.timeout_s == 7 and spec.category == "mcp"
    function = spec.function_schema()["function"]
    assert function["name"] == "calc__add" and function["description"] == "Add two numbers."
    assert function["parameters"] == {k: v for k, v in SCHEMA.items() if k != "$schema"}
    assert spec.source is not None and spec.source.recorded() == {
        "schema_sha256": schema_sha256(listed()),
        "server_name": "calc-server",
        "server_version": "1.2.3",
    }


def test_include_and_exclude_globs_select_by_the_servers_tool_name() -> None:
    server = McpServer(command="x", include=("get_*", "add"), exclude=("get_secret*",))
    assert [selected(server, n) for n in ("add", "get_time", "get_secret_key", "delete")] == [
        True,
        True,
        False,
        False,
    ]
    tools, _ = tools_of(server, listed("add"), listed("delete"), listed("get_secret"))
    assert list(tools) == ["calc__add"]


def test_tools_that_cannot_be_used_are_left_out_with_why() -> None:
    tools, skipped = tools_of(
        McpServer(command="x"),
        listed("has space"),
        listed("task", execution=types.ToolExecution(task_support="required")),
        types.Tool(name="bad", input_schema={"type": "object", "properties": {"a": {"type": 5}}}),
    )
    assert tools == {}
    assert "not a valid tool name" in skipped["has space"]
    assert "MCP task" in skipped["task"]
    assert "not a valid JSON schema" in skipped["bad"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"a": 1}', "'b' is a required property"),
        ('{"a": "one", "b": 2}', "at a: 'one' is not of type 'number'"),
        ('{"a": 1, "b": -1}', "at b: -1 is less than the minimum of 0"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_arguments_the_schema_refuses_are_invalid_arguments(arguments: str, says: str) -> None:
    spec = tools_of(McpServer(command="x"), listed())[0]["calc__add"].spec
    refused = spec.parse(arguments)
    assert isinstance(refused, ToolError) and refused.error_code == "INVALID_ARGUMENTS"
    assert says in refused.error and "calc__add" in refused.error


def test_arguments_the_schema_accepts_are_passed_as_they_are() -> None:
    spec = tools_of(McpServer(command="x"), listed())[0]["calc__add"].spec
    assert spec.parse('{"a": 1.5, "b": 2}') == {"a": 1.5, "b": 2}


def test_the_schema_hash_covers_name_description_schema_and_annotations() -> None:
    base = schema_sha256(listed())
    assert base == schema_sha256(listed())
    assert len(base) == 64
    assert base != schema_sha256(listed("add2"))
    assert base != schema_sha256(listed(annotations=types.ToolAnnotations(read_only_hint=True)))
    changed = types.Tool(name="add", description="Add.", input_schema=SCHEMA)
    assert base != schema_sha256(changed)
    reordered = types.Tool(
        name="add", description="Add two numbers.", input_schema=dict(reversed(SCHEMA.items()))
    )
    assert base == schema_sha256(reordered)  # canonical JSON: key order does not count


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, False),
        (types.ToolAnnotations(), False),
        (types.ToolAnnotations(read_only_hint=True), True),
        (types.ToolAnnotations(idempotent_hint=True), True),
        (types.ToolAnnotations(read_only_hint=False, destructive_hint=True), False),
    ],
)
def test_read_only_or_idempotent_tools_are_idempotent(
    annotations: types.ToolAnnotations | None, expected: bool
) -> None:
    assert idempotent(annotations) is expected
    tools, _ = tools_of(McpServer(command="x"), listed(annotations=annotations))
    assert tools["calc__add"].spec.idempotent is expected


def result(*content: Any, **fields: Any) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), **fields)


def test_text_results_are_text() -> None:
    text = types.TextContent(text="3")
    assert converted(result(text, types.TextContent(text="done"))) == "3\ndone"


def test_structured_content_is_kept_beside_the_text() -> None:
    got = converted(result(types.TextContent(text='{"sum": 3}'), structured_content={"sum": 3}))
    assert got == {"text": '{"sum": 3}', "structured": {"sum": 3}}


def test_an_error_result_is_a_tool_error_with_the_servers_text() -> None:
    got = converted(result(types.TextContent(text="no such city"), is_error=True))
    assert got == ToolError(error="no such city", error_code="TOOL_ERROR")
    assert isinstance(converted(result(is_error=True)), ToolError)


def test_images_and_resources_are_recorded_by_hash_without_their_payload() -> None:
    png = b"\x89PNG fake"
    data = base64.b64encode(png).decode()
    image = types.ImageContent(data=data, mime_type="image/png")
    gz = types.EmbeddedResource(resource=types.BlobResourceContents(uri="file:///a.gz", blob=data))
    got = converted(
        result(
            image,
            gz,
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="hello")
            ),
            types.ResourceLink(uri="file:///b", name="b", mime_type="text/plain"),
        ),
        stored={hashlib.sha256(png).hexdigest()},
    )
    digest = {"sha256": hashlib.sha256(png).hexdigest(), "bytes": len(png), "stored": True}
    assert got == {
        "content": [
            {"type": "image", "mimeType": "image/png", **digest},
            {"type": "resource", "uri": "file:///a.gz", **digest},
            {"type": "resource", "uri": "file:///a.txt", "text": "hello"},
            {"type": "resource_link", "uri": "file:///b", "name": "b", "mimeType": "text/plain"},
        ]
    }
    assert data not in msgspec.json.encode(got).decode()
    assert payloads(result(image, gz)) == [
        Payload(png, "image/png"),
        Payload(png, "application/octet-stream"),
    ]
    assert payloads(result(image, is_error=True)) == []


def blob(size: int, fill: int) -> Payload:
    return Payload(bytes([fill]) * size, "image/png")


def test_payloads_are_kept_while_together_they_fit_the_ledger_cap() -> None:
    a, b, c = blob(600, 1), blob(500, 2), blob(100, 3)
    assert within([a, a, c], 1024) == [a, c]  # the same bytes count once
    assert within([a, b, c], 1024) == [a]  # b does not fit: neither does what follows it
    assert within([a, b], 1100) == [a, b]
    assert within([blob(2048, 4)], 1024) == []


def call_with_images(*images: bytes, limit_bytes: int) -> tuple[Any, Ledger]:
    content = [
        types.ImageContent(data=base64.b64encode(i).decode(), mime_type="image/png") for i in images
    ]

    class Images:
        async def call(
            self, tool: str, arguments: dict[str, Any], timeout_s: float
        ) -> types.CallToolResult | ToolError:
            return result(*content)

    tools, _ = discovered("img", McpServer(command="x"), [listed("show")], INFO, Images())
    ledger = Ledger.in_memory()
    agent = ledger.register_agent("viewer")
    run = Run.start("viewer", agent.queue_run(trigger="webhook", focus=None, payload={}))
    limits = RuntimeConfig(tool_result_ledger_bytes=limit_bytes)
    ctx = tool_context(agent, run, "c1", blobs=ledger.blobs, limits=limits)
    return asyncio.run(tools["img__show"].execute({}, ctx)), ledger


def test_an_mcp_tool_stores_its_images_within_the_cap_and_digests_the_rest() -> None:
    small, big = b"\x89PNG small" * 10, b"\x89PNG big" * 200
    told, ledger = call_with_images(small, big, limit_bytes=1024)
    first, second = told["content"]
    assert (first["stored"], second["stored"]) == (True, False)
    assert ledger.blobs.get(first["sha256"]) == ("image/png", small)
    assert second == {
        "type": "image",
        "mimeType": "image/png",
        "sha256": hashlib.sha256(big).hexdigest(),
        "bytes": len(big),
        "stored": False,
    }
    with pytest.raises(UnknownBlob):
        ledger.blobs.get(second["sha256"])


def test_a_tool_call_requested_stored_before_mcp_decodes_with_empty_provenance() -> None:
    old = StoredEvent(
        originator_id=uuid4(),
        originator_version=4,
        topic="ToolCallRequested",
        state=msgspec.json.encode(
            {
                "originator_id": str(uuid4()),
                "originator_version": 4,
                "timestamp": datetime.now(UTC).isoformat(),
                "call_id": "c1",
                "tool": "remember",
                "arguments": {"content": "x"},
            }
        ),
    )
    event = MsgspecMapper().to_domain_event(old)
    assert isinstance(event, ev.ToolCallRequested)
    assert (event.schema_sha256, event.server_name, event.server_version) == ("", "", "")
    # and a built-in's request is stored as before: no empty provenance fields
    assert b"server_name" not in MsgspecMapper().to_stored_event(event).state
