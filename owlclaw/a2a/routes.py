"""The ASGI app the webhook mounts at ``/a2a``: for each served agent its card at
``/a2a/<agent id>/.well-known/agent-card.json`` and its JSON-RPC endpoint at ``/a2a/<agent
id>`` (A2A 1.0 method names, and 0.3's ``message/send``, ``tasks/get``, ... on the same path),
both from the SDK's Starlette routes, each call authorized first (``owlclaw.a2a.authorized``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from owlclaw.a2a.authorized import Authorized
from owlclaw.a2a.card import agent_card
from owlclaw.a2a.handler import RunService, RunTasks
from owlclaw.a2a.paths import CARD_PATH, PREFIX
from owlclaw.app import AgentApp


class BodyOnce:
    """Hands the app the request body once, then makes it wait (as a server does until the
    client goes away): aiohttp-asgi answers every later ``receive()`` at once with an empty
    body, and the SSE response of ``message/stream``, which listens for a disconnect that way,
    would spin the event loop and starve its own stream."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        received = False

        async def once() -> Message:
            nonlocal received
            if received:
                await asyncio.Event().wait()  # cancelled when the response ends
            message = await receive()
            received = message["type"] == "http.request" and not message.get("more_body")
            return message

        await self.app(scope, once, send)


def a2a_app(service: RunService, apps: Mapping[str, AgentApp], base_url: str) -> Authorized:
    """Every agent of ``apps`` as an A2A agent answering under ``base_url``/a2a."""
    routes: list[BaseRoute] = []
    for agent_id, app in apps.items():
        card = agent_card(app, f"{base_url}{PREFIX}/{agent_id}")
        routes += create_agent_card_routes(card, card_url=f"/{agent_id}{CARD_PATH}")
        routes += create_jsonrpc_routes(
            RunTasks(service, agent_id), rpc_url=f"/{agent_id}", enable_v0_3_compat=True
        )
    return Authorized(BodyOnce(Starlette(routes=routes)))
