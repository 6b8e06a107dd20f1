"""The agents page: every served agent at a glance (``owlclaw.overview``)."""

from __future__ import annotations

from aiohttp import web

from owlclaw.console.render import render
from owlclaw.overview import agent_overviews
from owlclaw.service import Service


def routes(service: Service) -> list[web.RouteDef]:
    async def agents(request: web.Request) -> web.Response:
        return render(request, "agents.html", agents=await agent_overviews(service))

    return [web.get("/", agents)]
