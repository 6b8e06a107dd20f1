"""Each A2A JSON-RPC call is authorized by its method and the agent its path names before the
SDK's app reads it: a refusal is a JSON 403 naming the role and the app never runs; an allowed
call reaches the app with its body whole; a method not listed is the server token's alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from owlclaw.a2a.authorized import Authorized
from owlclaw.access.authorize import Principal, bootstrap
from owlclaw.access.caller import calling_as
from owlclaw.access.roles import parse_grant


class Echo:
    """The app behind: answers the body it received."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        message = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": message.get("body", b"")})


def post(principal: Principal, path: str, body: Any) -> tuple[httpx.Response, int]:
    echo = Echo()

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=Authorized(echo), root_path="/a2a")
        async with httpx.AsyncClient(transport=transport, base_url="http://owl") as client:
            return await client.post(path, content=json.dumps(body))

    with calling_as(principal):
        return asyncio.run(call()), echo.calls


def rpc(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}


def who(grant: str) -> Principal:
    return Principal("ann", (parse_grant(grant),))


@pytest.mark.parametrize(
    ("grant", "method", "role"),
    [
        ("viewer:acme.*", "message/send", "operator"),
        ("viewer", "SendStreamingMessage", "operator"),
        ("operator:globex.*", "SendMessage", "operator"),
        ("operator", "tasks/get", "viewer"),
        ("approver", "GetTask", "viewer"),
        ("viewer", "tasks/cancel", "operator"),
    ],
)
def test_a_call_the_roles_do_not_allow_is_a_403_naming_the_role(
    grant: str, method: str, role: str
) -> None:
    answer, calls = post(who(grant), "/a2a/acme.bot", rpc(method))
    assert (answer.status_code, calls) == (403, 0)
    body = answer.json()
    assert (body["code"], body["role"], body["agent_id"]) == ("forbidden", role, "acme.bot")
    assert f"needs role {role} on agent 'acme.bot'" in body["error"]


@pytest.mark.parametrize(
    ("grant", "method"),
    [("operator:acme.*", "message/send"), ("viewer:acme.*", "GetTask"), ("operator", "CancelTask")],
)
def test_an_allowed_call_reaches_the_app_with_its_body(grant: str, method: str) -> None:
    answer, calls = post(who(grant), "/a2a/acme.bot", rpc(method))
    assert (answer.status_code, calls) == (200, 1)
    assert answer.json() == rpc(method)


def test_a_method_not_listed_is_the_server_tokens_alone() -> None:
    refused, calls = post(who("admin"), "/a2a/acme.bot", rpc("ListTasks"))
    assert (refused.status_code, calls) == (403, 0)
    assert refused.json()["error"] == "A2A method 'ListTasks' is open to the server token only"
    passed, calls = post(bootstrap(), "/a2a/acme.bot", rpc("ListTasks"))
    assert (passed.status_code, calls) == (200, 1)


def test_a_body_without_a_method_goes_to_the_app_which_refuses_it() -> None:
    answer, calls = post(who("viewer"), "/a2a/acme.bot", [1, 2])
    assert (answer.status_code, calls) == (200, 1)  # the SDK answers an invalid request
