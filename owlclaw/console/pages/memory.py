"""The memory page: an agent's MEMORY.md (as text) and recall with scores and decay, through
the code ``owlclaw memory --recall`` uses."""

from __future__ import annotations

import asyncio

from aiohttp import web

from owlclaw.console.render import render
from owlclaw.inspection import memory_of
from owlclaw.service import Service
from projections.memory import MAX_LIMIT, MIN_LIMIT


def _limit(given: str) -> int:
    try:
        return min(MAX_LIMIT, max(MIN_LIMIT, int(given)))
    except ValueError:
        return 5


def routes(service: Service) -> list[web.RouteDef]:
    async def memory(request: web.Request) -> web.Response:
        agent = request.match_info["agent"]
        service.served(agent)
        assert service.ledger is not None
        query = request.query.get("q", "").strip() or None
        limit = _limit(request.query.get("limit", "5"))
        reading = await asyncio.to_thread(
            memory_of, service.ledger, service.config, agent, query, limit
        )
        text = await asyncio.to_thread(reading.memory_md.read_text, encoding="utf-8")
        return render(
            request,
            "memory.html",
            agent=agent,
            query=query or "",
            limit=limit,
            reading=reading,
            memory_text=text,
            half_life_days=service.config.memory.half_life_days,
        )

    return [web.get("/memory/{agent}", memory)]
