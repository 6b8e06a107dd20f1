"""The agents page: the registered agents at a glance, a page at a time
(``owlclaw.server.overview``)."""

from __future__ import annotations

from aiohttp import web

from owlclaw.server.console.render import render
from owlclaw.server.overview import agent_overviews
from owlclaw.server.service import Service
from projections.agents import MAX_PAGE, PAGE_SIZE


def page_size(given: str) -> int:
    """The ``limit`` query parameter: 1 to MAX_PAGE agents (400 otherwise)."""
    if not given:
        return PAGE_SIZE
    if not given.isdigit() or not 1 <= int(given) <= MAX_PAGE:
        raise web.HTTPBadRequest(text=f"limit {given!r}: a whole number from 1 to {MAX_PAGE}")
    return int(given)


def routes(service: Service) -> list[web.RouteDef]:
    async def agents(request: web.Request) -> web.Response:
        limit = page_size(request.query.get("limit", ""))
        after = request.query.get("after") or None
        page = await agent_overviews(service, after, limit)
        return render(request, "agents.html", page=page, limit=limit, after=after)

    return [web.get("/", agents)]
