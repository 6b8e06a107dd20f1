"""The memory page: an agent's MEMORY.md (rendered, and its source) and recall with scores and
decay, through the code ``owlclaw memory --recall`` uses."""

from __future__ import annotations

import asyncio

from aiohttp import web

from owlclaw.reports.inspection import memory_of
from owlclaw.server.console.markdown import to_html
from owlclaw.server.console.render import render
from owlclaw.server.service import Service
from projections import MemoryView
from projections.recall import MAX_LIMIT, MIN_LIMIT


def _limit(given: str) -> int | None:
    """How many memories to recall, or None when ``given`` is not one the recall tool takes."""
    try:
        limit = int(given)
    except ValueError:
        return None
    return limit if MIN_LIMIT <= limit <= MAX_LIMIT else None


def routes(service: Service) -> list[web.RouteDef]:
    async def memory(request: web.Request) -> web.Response:
        agent = request.match_info["agent"]
        service.served(agent)
        assert service.ledger is not None
        query = request.query.get("q", "").strip()
        given = request.query.get("limit", "5")
        limit = _limit(given)
        error = None
        if limit is None:
            error = f"limit {given!r}: a whole number from {MIN_LIMIT} to {MAX_LIMIT}; not recalled"
        recall = query if query and limit is not None else None
        reading = await asyncio.to_thread(
            memory_of,
            service.ledger,
            service.view(MemoryView),
            service.config,
            agent,
            recall,
            limit or MIN_LIMIT,
        )
        text = await asyncio.to_thread(reading.memory_md.read_text, encoding="utf-8")
        return render(
            request,
            "memory.html",
            agent=agent,
            query=query,
            limit=given,
            reading=reading,
            error=error,
            memory_text=text,
            memory_html=to_html(text),
            half_life_days=service.config.memory.half_life_days,
        )

    return [web.get("/memory/{agent}", memory)]
