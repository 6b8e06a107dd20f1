"""The projections and workers page: each projection's position, lag and parked events (as
``owlclaw projections status`` shows them) with its worker's restarts, and every worker of the
service."""

from __future__ import annotations

import asyncio

from aiohttp import web

from owlclaw.reports.inspection import projections_status
from owlclaw.server.console.render import render
from owlclaw.server.service import Service


def routes(service: Service) -> list[web.RouteDef]:
    async def projections(request: web.Request) -> web.Response:
        assert service.ledger is not None
        statuses = await asyncio.to_thread(projections_status, service.ledger, service.views)
        workers = service.supervisor.status()  # what service.status() reports as "workers"
        return render(
            request,
            "projections.html",
            projections=statuses,
            workers=workers,
            worker_of={w.name: w for w in workers},
        )

    return [web.get("/projections", projections)]
