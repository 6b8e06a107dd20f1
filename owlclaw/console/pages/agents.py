"""The agents page: every served agent at a glance."""

from __future__ import annotations

from aiohttp import web

from owlclaw.console.render import render
from owlclaw.service import Service


def routes(service: Service) -> list[web.RouteDef]:
    async def agents(request: web.Request) -> web.Response:
        status = service.status()
        return render(request, "agents.html", report=status)

    return [web.get("/", agents)]
