"""Each A2A JSON-RPC call authorized before the SDK reads it: its method's action on the agent its
path names (``/a2a/<agent id>``), for the principal the webhook's guard authenticated
(``caller()``).

One endpoint carries calls that send, read and cancel, so the guard cannot tell them apart by
route: this reads the JSON-RPC body first. A refusal is the webhook's JSON 403 naming the
missing role, answered at the HTTP layer as for any authenticated client lacking a permission,
before any run is read or submitted. A method not listed is the server token's alone (fail
closed); a body without a method goes on to the SDK, which refuses it (nothing is done)."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from owlclaw.access.authorize import Action, Principal, authorize, bootstrap
from owlclaw.access.caller import caller

METHODS: dict[str, Action] = {
    "SendMessage": Action.TRIGGER,
    "SendStreamingMessage": Action.TRIGGER,
    "GetTask": Action.READ_RUNS,
    "SubscribeToTask": Action.READ_RUNS,
    "CancelTask": Action.CANCEL,
    "message/send": Action.TRIGGER,
    "message/stream": Action.TRIGGER,
    "tasks/get": Action.READ_RUNS,
    "tasks/resubscribe": Action.READ_RUNS,
    "tasks/cancel": Action.CANCEL,
}
"""A2A 1.0's method names and 0.3's -> the action; a task is a run of the path's agent."""

MAX_BODY_BYTES = 1024 * 1024


def agent_of(scope: Scope) -> str | None:
    """The agent a JSON-RPC call's path names (``/a2a/<agent id>``); None for any other path."""
    if scope["type"] != "http" or scope.get("method") != "POST":
        return None
    path: str = scope["path"]
    root = f"{scope.get('root_path', '')}/"
    agent_id = path[len(root) :] if path.startswith(root) else ""
    return agent_id if agent_id and "/" not in agent_id else None


def method_of(body: bytes) -> str | None:
    """The JSON-RPC method the SDK will read from ``body`` (it decodes it the same way)."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    method = request.get("method") if isinstance(request, dict) else None
    return method if isinstance(method, str) else None


def refusal(principal: Principal, method: str, agent_id: str) -> dict[str, str | None] | None:
    """The 403's body when ``principal`` may not call ``method`` on ``agent_id``."""
    action = METHODS.get(method)
    if action is None:
        if principal == bootstrap():
            return None
        error = f"A2A method {method!r} is open to the server token only"
        return {"error": error, "code": "forbidden"}
    refused = authorize(principal, action, agent_id)
    return None if refused is None else refused.body()


class Authorized:
    """The A2A app, each JSON-RPC call (a POST to ``/<agent id>``) authorized first."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent_id = agent_of(scope)
        if agent_id is None:
            await self.app(scope, receive, send)  # a card, or no route of the app's: no call
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                too_large = {"error": "the request body is too large", "code": "too_large"}
                await JSONResponse(too_large, status_code=413)(scope, receive, send)
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        method = method_of(body)
        refused = None if method is None else refusal(caller(), method, agent_id)
        if refused is not None:
            await JSONResponse(refused, status_code=403)(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed over first, whole."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
