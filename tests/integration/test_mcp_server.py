"""The MCP server of a real `owlclaw run` service (in this process, agents hosted locally), driven
by the `mcp` SDK's own client over streamable HTTP with the webhook's bearer token: its tools and
resources, a run triggered and waited for, an approval answered, refusals as tool errors, and a
request without the token refused."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent, TextResourceContents
from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.messages import Result
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.approvals import HANDLERS
from tests.apps import make_app
from tests.scripted import call
from tests.served import local_service

pytestmark = pytest.mark.integration

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
LESSON = "Orders above 1000 need a second look."
SCRIPT = {
    "cases": [
        {
            "when": "Focus: learn",
            "steps": [
                {"tool_calls": [call("remember", content=LESSON, tags=["lesson"])]},
                {"content": "noted"},
            ],
        },
        {
            "when": "Focus: buy",
            "steps": [
                {"tool_calls": [call("place_order", symbol="ACME", amount=5000)]},
                {"content": "bought"},
            ],
        },
    ]
}


def trace_id(traceparent: str) -> str:
    return traceparent.split("-")[1]


def serve_and(
    fresh_db: Database, tmp_path: Path, then: Callable[[Service, OwlClawConfig], Awaitable[None]]
) -> None:
    """Serve the agent ``desk``, whose order tool asks for approval, and run ``then``."""
    config_text = (
        '[agent]\nid = "desk"\nmodels = ["scripted/desk"]\n[governance]\nask = ["place_order"]\n'
    )
    root = make_app(tmp_path / "desk", config=config_text)
    (root / "handlers.py").write_text(HANDLERS.format(orders=str(tmp_path / "orders.txt")))
    (root / "scripts").mkdir()
    (root / "scripts" / "desk.json").write_text(json.dumps(SCRIPT))
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(root)])

    async def main() -> None:
        async with serving(service, config):
            await then(service, config)

    asyncio.run(main())


@asynccontextmanager
async def connected(config: OwlClawConfig) -> AsyncIterator[Client]:
    headers = {"Authorization": "Bearer test-token"}
    async with httpx2.AsyncClient(headers=headers, trust_env=False, timeout=120) as http:
        transport = streamable_http_client(url(config), http_client=http)
        async with Client(transport, raise_exceptions=True) as client:
            yield client


def url(config: OwlClawConfig) -> str:
    return f"http://127.0.0.1:{config.server.port}/mcp"


def data(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error(result: CallToolResult) -> str:
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def pending(client: Client) -> list[dict[str, Any]]:
    """The pending approvals, once there is one (the triggered run parks in its mailbox)."""
    for _ in range(600):
        found: list[dict[str, Any]] = data(await client.call_tool("list_approvals", {}))[
            "approvals"
        ]
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError("no approval became pending")


def test_an_mcp_client_drives_and_inspects_the_served_agent(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        async with connected(config) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {
                "list_agents",
                "trigger_run",
                "read_timeline",
                "list_approvals",
                "answer_approval",
                "answer_question",
                "recall_memories",
            }
            templates = (await client.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                "owlclaw://agents/{agent_id}/memory",
                "owlclaw://agents/{agent_id}/runs/{run_no}/timeline",
            }
            agents = data(await client.call_tool("list_agents", {}))["agents"]
            assert list(agents) == ["desk"] and agents["desk"]["runs"] == 0

            learn = {"agent_id": "desk", "focus": "learn", "wait": True}
            caller = {"traceparent": TRACEPARENT}  # MCP's _meta: the run continues the trace
            # The SDK's client puts the current span's context in _meta over ours when a
            # tracer provider is set (another test may have set one): a span of the caller's
            # trace, so the call is made in that trace's context.
            calling = otel_context.attach(TraceContextTextMapPropagator().extract(caller))
            try:
                learned = data(await client.call_tool("trigger_run", learn, meta=caller))
            finally:
                otel_context.detach(calling)
            assert learned["result"]["status"] == "completed" and learned["answer"] == "noted"
            assert learned["result"]["tools_called"] == ["remember"]
            assert service.ledger is not None
            run_id = uuid.UUID(learned["run_id"])
            events = service.ledger.stream(run_id)
            [started] = [e for e in events if isinstance(e, ev.RunStarted)]
            assert started.trigger == "mcp" and list(started.context) == ["traceparent"]
            assert trace_id(started.context["traceparent"]) == trace_id(TRACEPARENT)

            recalled = data(
                await client.call_tool(
                    "recall_memories", {"agent_id": "desk", "query": "large orders", "k": 3}
                )
            )
            assert [m["content"] for m in recalled["memories"]] == [LESSON]
            [memory_md] = (await client.read_resource("owlclaw://agents/desk/memory")).contents
            assert isinstance(memory_md, TextResourceContents) and LESSON in memory_md.text

            by_id = data(
                await client.call_tool(
                    "read_timeline", {"agent_id": "desk", "run_id": learned["run_id"]}
                )
            )
            assert by_id["run_no"] == 1 and by_id["status"] == "completed"
            texts = [s["text"] for s in by_id["steps"]]
            assert texts[0] == "run 1 started by mcp: 'learn'" and texts[-1] == "completed: noted"
            assert any(t.startswith("→ remember(") for t in texts)
            [timeline] = (
                await client.read_resource("owlclaw://agents/desk/runs/1/timeline")
            ).contents
            assert isinstance(timeline, TextResourceContents)
            assert timeline.text.splitlines()[0] == f"desk run 1 ({learned['run_id']}): completed"

            bought = data(
                await client.call_tool("trigger_run", {"agent_id": "desk", "focus": "buy"})
            )
            [approval] = await pending(client)
            assert (approval["run_id"], approval["tool"]) == (bought["run_id"], "place_order")
            answered = data(
                await client.call_tool(
                    "answer_approval",
                    {
                        "approval_id": approval["approval_id"],
                        "decision": "approve",
                        "digest": approval["digest"],
                        "note": "ok",
                    },
                )
            )
            assert (answered["status"], answered["run_id"]) == ("granted", bought["run_id"])
            again = await client.call_tool(
                "answer_approval",
                {
                    "approval_id": approval["approval_id"],
                    "decision": "deny",
                    "digest": approval["digest"],
                },
            )
            assert error(again).endswith(f": approval {approval['approval_id']} is already granted")

        result = await service.ask(Result(agent_id="desk", run_id=bought["run_id"]))
        assert result.status == "completed" and result.tools_called == ["place_order"]
        assert (tmp_path / "orders.txt").read_text() == "ACME 5000.0\n"
        agent = service.ledger.load_agent("desk")
        [granted] = [
            e for e in service.ledger.stream(agent.id) if isinstance(e, ev.ApprovalGranted)
        ]
        assert (granted.by, granted.note) == ("mcp", "ok")

    serve_and(fresh_db, tmp_path, scenario)


def test_refusals_are_tool_errors_and_no_token_is_no_entry(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(_: Service, config: OwlClawConfig) -> None:
        async with connected(config) as client:
            unknown_agent = await client.call_tool("trigger_run", {"agent_id": "nobody"})
            assert error(unknown_agent) == (
                "Error executing tool trigger_run: agent 'nobody' is not served here"
            )
            no_run = await client.call_tool("read_timeline", {"agent_id": "desk", "run_no": 7})
            assert error(no_run).endswith(": agent 'desk' has no run 7 (it has 0)")
            neither = await client.call_tool("read_timeline", {"agent_id": "desk"})
            assert error(neither).endswith(": name the run by run_no or by run_id (one of them)")
            no_approval = await client.call_tool(
                "answer_approval", {"approval_id": "nope", "decision": "approve", "digest": ""}
            )
            assert error(no_approval).endswith(": no approval 'nope'")
            no_question = await client.call_tool(
                "answer_question", {"approval_id": "nope", "answer": "hold", "digest": ""}
            )
            assert error(no_question).endswith(": no approval 'nope'")
            bad_k = await client.call_tool(
                "recall_memories", {"agent_id": "desk", "query": "x", "k": 99}
            )
            assert "k" in error(bad_k) and "Traceback" not in error(bad_k)

        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        async with httpx.AsyncClient(trust_env=False) as http:
            refused = await http.post(url(config), json=body)
            wrong = await http.post(
                url(config), json=body, headers={"Authorization": "Bearer wrong"}
            )
        assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
        assert wrong.status_code == 401

    serve_and(fresh_db, tmp_path, scenario)
