"""The agents page: the registered agents at a glance, a page at a time
(``owlclaw.server.overview``); a principal with ``viewer`` on some agents sees those only."""

from __future__ import annotations

import functools

from aiohttp import web

from owlclaw.access.authorize import Action
from owlclaw.server.console.access import may
from owlclaw.server.console.auth import principal_of
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
        principal = principal_of(request)
        visible = None
        if not may(principal, Action.READ_STATUS, None):  # scoped: only its agents are listed
            visible = functools.partial(may, principal, Action.READ_STATUS)
        page = await agent_overviews(service, after, limit, visible)
        return render(request, "agents.html", page=page, limit=limit, after=after)

    return [web.get("/", agents)]
