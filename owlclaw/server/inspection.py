"""What the CLI asks a running server instead of starting it itself: an agent's memory recalled
with the server's warm embedder and memory view (``owlclaw memory --recall``), and a recorded
run re-executed with the runtime already imported here (``owlclaw replay --verify``).

- ``GET /agents/{id}/memory?recall=TEXT&k=N``: ``owlclaw memory AGENT --recall TEXT --limit N
  --json``'s answer (``k`` 1-20, default 5); the memory view is brought up to date first;
- ``POST /agents/{id}/runs/{n}/verify``: the run's ``ReplayReport`` (nothing is written).

Both read any agent of the ledger (served here or not), as the CLI does: 404 ``unknown_agent``
(the ledger's message), ``unknown_run``; 400 ``bad_request`` for a ``k`` out of range. Their
roles are the guard's (``memory.read``, ``runs.read``)."""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from owlclaw.audit.verify import NoSuchRun, verify_run
from owlclaw.reports.inspection import memory_of
from owlclaw.server.http_errors import json_error
from owlclaw.server.service import Service
from projections import MemoryView
from projections.recall import MAX_LIMIT, MIN_LIMIT

MEMORY = "/agents/{agent_id}/memory"
VERIFY = "/agents/{agent_id}/runs/{run_no}/verify"


def routes(service: Service) -> list[web.RouteDef]:
    async def memory(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        query = request.query.get("recall")
        given = request.query.get("k", "5")
        limit = int(given) if given.isdigit() else 0
        if not MIN_LIMIT <= limit <= MAX_LIMIT:
            return json_error(400, "bad_request", f"k {given!r}: from {MIN_LIMIT} to {MAX_LIMIT}")
        assert service.ledger is not None
        reading = await asyncio.to_thread(
            memory_of,
            service.ledger,
            service.view(MemoryView),
            service.config,
            agent_id,
            query,
            limit,
        )
        return web.json_response(reading.as_json(agent_id, query))

    async def verify(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        given = request.match_info["run_no"]
        if not given.isdigit():
            return json_error(400, "bad_request", f"run {given!r}: a run number (1, 2, ...)")
        assert service.ledger is not None
        try:
            report = await asyncio.to_thread(
                verify_run, service.ledger, agent_id, int(given), None, service.config.runtime
            )
        except NoSuchRun as e:
            return json_error(404, "unknown_run", str(e))
        return web.Response(body=msgspec.json.encode(report), content_type="application/json")

    return [web.get(MEMORY, memory), web.post(VERIFY, verify)]
