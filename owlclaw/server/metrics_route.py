"""``GET /metrics``: the service's counters plus what it is at the moment of the scrape."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from owlclaw.server.metrics import ServiceState
from owlclaw.server.service import HOSTS_TIMEOUT_S, Service
from projections.status import projection_status

log = logging.getLogger(__name__)

PATH = "/metrics"


async def service_state(service: Service) -> ServiceState:
    ledger = service.ledger
    assert ledger is not None
    projections = await asyncio.to_thread(
        lambda: [projection_status(ledger, runner.view) for runner in service.projections]
    )
    approvals = await asyncio.to_thread(service.pending_approvals)
    mailboxes: dict[str, int] | None = None
    try:  # a host that does not answer (a Ray actor restarting) leaves the gauge out
        host = await asyncio.wait_for(service.agents.status(), HOSTS_TIMEOUT_S)
        mailboxes = {agent_id: a.queued for agent_id, a in host.agents.items()}
    except Exception as e:
        log.warning("metrics: the agents' hosts did not say their mailbox depth: %s", e)
    return ServiceState(
        projections, service.supervisor.status(), list(service.apps), approvals, mailboxes
    )


def metrics_route(service: Service) -> web.RouteDef:
    """``GET /metrics`` in Prometheus' text format."""

    async def scrape(_: web.Request) -> web.Response:
        state = await service_state(service)
        body = await asyncio.to_thread(service.metrics.exposition, state)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return web.get(PATH, scrape)
