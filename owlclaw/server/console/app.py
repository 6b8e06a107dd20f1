"""The console as an aiohttp sub-application, mounted at ``/ui`` by the webhook's app."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from owlclaw.server.console import auth
from owlclaw.server.console.pages import (
    agents,
    approvals,
    ledger,
    memory,
    overview,
    projections,
    runs,
    schedules,
)
from owlclaw.server.console.render import CLOSING, ENVIRONMENT, SERVICE, environment
from owlclaw.server.console.session import session_key
from owlclaw.server.service import NotServed, Service

STATIC = Path(__file__).parent / "static"
PAGES = (agents, overview, runs, ledger, memory, schedules, projections, approvals)


@web.middleware
async def served(request: web.Request, handler: Any) -> web.StreamResponse:
    """Pages answer 503 until the service has started; an agent that is not served here is a
    404, as on the webhook."""
    if not request.app[SERVICE].ready and not request.path.startswith(auth.OPEN_PATHS):
        raise web.HTTPServiceUnavailable(text="the service is still starting; reload shortly")
    try:
        response: web.StreamResponse = await handler(request)
    except NotServed as e:
        raise web.HTTPNotFound(text=str(e)) from e
    return response


def make_console(service: Service, token: str) -> web.Application:
    console = web.Application(middlewares=[auth.guard, served])
    console[auth.TOKEN_KEY] = token
    console[auth.SESSION_KEY] = session_key(token)
    console[SERVICE] = service
    console[ENVIRONMENT] = environment()
    console[CLOSING] = closing = asyncio.Event()

    async def close(_: web.Application) -> None:
        closing.set()

    console.on_shutdown.append(close)
    console.add_routes(auth.routes())
    for page in PAGES:
        console.add_routes(page.routes(service))
    console.router.add_static("/static", STATIC)
    return console
