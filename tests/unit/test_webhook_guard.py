"""The webhook's guard without a database: a principal's token is looked up, a route with no
action is the server token's alone (fail closed), a missing role is a JSON 403 before the
handler runs, no principal's token is tried before the service has started, and a principal
reaches the MCP and A2A apps as their caller, each call authorized there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from events import Ledger
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.config import OwlClawConfig
from owlclaw.server.guard import ROUTES
from owlclaw.server.service import Service
from owlclaw.server.webhook import make_app


def served(ready: bool) -> tuple[Service, str]:
    service = Service(OwlClawConfig(), [])
    service.principals = PrincipalStore(Ledger.in_memory())
    _, token = service.principals.add("ann", [parse_grant("viewer")], by="test")
    service.ready = ready
    return service, token


def answers(service: Service, *requests: tuple[str, str, str]) -> list[tuple[int, dict[str, str]]]:
    async def call() -> list[tuple[int, dict[str, str]]]:
        found = []
        async with TestClient(TestServer(make_app(service, "secret"))) as client:
            for method, path, token in requests:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                response = await client.request(method, path, headers=headers, json={})
                found.append((response.status, await response.json()))
        return found

    return asyncio.run(call())


def test_a_route_without_an_action_is_the_server_tokens_alone() -> None:
    service, token = served(ready=True)
    (beside, nowhere) = answers(service, ("POST", "/mcp/x", token), ("GET", "/nowhere", token))
    # /mcp/x reaches the MCP app (aiohttp-asgi matches by prefix), but is not its endpoint
    assert beside == (
        403,
        {"error": "/mcp/x is open to the server token only", "code": "forbidden"},
    )
    assert nowhere[0] == 404  # no route: aiohttp's own answer


def test_a_missing_role_is_refused_before_the_handler() -> None:
    service, token = served(ready=True)
    ((status, body),) = answers(service, ("POST", "/agents/anyone/trigger", token))
    assert status == 403  # the agent is not even served: the handler never ran
    assert (body["code"], body["role"], body["agent_id"]) == ("forbidden", "operator", "anyone")


@pytest.mark.parametrize(("ready", "expected"), [(True, 401), (False, 503)])
def test_unknown_tokens(ready: bool, expected: int) -> None:
    service, _ = served(ready)
    (wrong, missing) = answers(service, ("GET", "/status", "owl_x"), ("GET", "/status", ""))
    assert wrong[0] == expected  # before the start, a token may be a principal's not yet known
    assert missing[0] == 401


def test_every_action_route_exists() -> None:
    app = make_app(Service(OwlClawConfig(), []), "secret")
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource}
    assert set(ROUTES) <= routes


def test_a_principal_reaches_the_mcp_and_a2a_apps_which_authorize_each_call() -> None:
    service, token = served(ready=True)  # ann: viewer on every agent

    async def call() -> tuple[dict[str, Any], int, dict[str, Any]]:
        async with TestClient(TestServer(make_app(service, "secret"))) as client:
            headers = {
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
            }
            tool = {"name": "trigger_run", "arguments": {"agent_id": "acme.bot"}}
            mcp = await client.post("/mcp", headers=headers, json=rpc("tools/call", tool))
            a2a = await client.post("/a2a/acme.bot", headers=headers, json=rpc("message/send", {}))
            return (await mcp.json())["result"], a2a.status, await a2a.json()

    result, status, refused = asyncio.run(call())
    assert result["isError"] and result["content"][0]["text"].endswith(
        "ann may not run.trigger: it needs role operator on agent 'acme.bot'"
    )
    assert status == 403 and (refused["role"], refused["agent_id"]) == ("operator", "acme.bot")


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
