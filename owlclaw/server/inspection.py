"""What the CLI asks a running server instead of starting it itself: an agent's memory recalled
with the server's warm embedder and memory view (``owlclaw memory --recall``), a recorded run
re-executed with the runtime already imported here (``owlclaw replay --verify``), and the
listings of its warm views and ledger (``owlclaw runs``, ``schedules``, ``ledger``, ``explain``),
which a CLI process would otherwise import the ledger, the views and the database driver for
(bench cli).

- ``GET /agents/{id}/memory?recall=TEXT&k=N``: ``owlclaw memory AGENT [--recall TEXT --limit N]
  --json``'s answer (``k`` 1-20, default 5); the memory view is brought up to date first;
- ``POST /agents/{id}/runs/{n}/verify``: the run's ``ReplayReport`` (nothing is written);
- ``GET /agents/{id}/runs?limit=N``: its latest runs (``Runs``; ``limit`` 1-1000, default 20);
- ``GET /agents/{id}/ledger?after=P&limit=N``: a page of its events (``LedgerPage``; no
  ``limit``: every event after ``P``);
- ``GET /agents/{id}/runs/{n}/manifest?step=S``: the run's decision manifest (``owlclaw
  explain``);
- ``GET /schedules?all=1`` and ``GET /agents/{id}/schedules?all=1``: every agent's schedules
  (those of the agents the principal may read the runs of) or one agent's (``Schedules``).

They read any agent of the ledger (served here or not), as the CLI does: 404 ``unknown_agent``
(the ledger's message, with the known agents), ``unknown_run``; 400 ``bad_request`` for a
number out of range. Their roles are the guard's (``memory.read``, ``runs.read``)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from events import UnknownAgent
from owlclaw.access.caller import caller
from owlclaw.audit.explain import NotRecorded, explain_run
from owlclaw.audit.ledger_page import ledger_page
from owlclaw.audit.verify import NoSuchRun, verify_run
from owlclaw.reports.inspection import memory_of, runs_of, schedules_of, with_known_agents
from owlclaw.server.http_errors import encoded, json_error
from owlclaw.server.seen import seen_schedules
from owlclaw.server.service import Service
from projections import MemoryView, RunsView, SchedulesView
from projections.recall import MAX_LIMIT, MIN_LIMIT

MEMORY = "/agents/{agent_id}/memory"
VERIFY = "/agents/{agent_id}/runs/{run_no}/verify"
RUNS = "/agents/{agent_id}/runs"
LEDGER = "/agents/{agent_id}/ledger"
MANIFEST = "/agents/{agent_id}/runs/{run_no}/manifest"
SCHEDULES = "/schedules"
AGENT_SCHEDULES = "/agents/{agent_id}/schedules"
RUNS_LIMIT = 1000
"""``owlclaw runs --limit``'s most."""


def _number(
    request: web.Request, name: str, least: int, most: int | None = None, default: int | None = None
) -> int | None:
    """A path part or query parameter: a whole number from ``least`` (to ``most``); ``default``
    when it is not given; else a 400 (``bad_request``, made JSON by ``json_errors``)."""
    given = request.match_info.get(name, request.query.get(name))
    if given is None:
        return default
    if given.isdigit() and least <= int(given) <= (int(given) if most is None else most):
        return int(given)
    bounds = f"from {least}" + ("" if most is None else f" to {most}")
    raise web.HTTPBadRequest(text=f"{name} {given!r}: a whole number {bounds}")


def routes(service: Service) -> list[web.RouteDef]:
    async def memory(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        query = request.query.get("recall")
        limit = _number(request, "k", MIN_LIMIT, MAX_LIMIT, default=5)
        assert service.ledger is not None and limit is not None
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
        run_no = _number(request, "run_no", 1)
        assert service.ledger is not None and run_no is not None
        try:
            report = await asyncio.to_thread(
                verify_run, service.ledger, agent_id, run_no, None, service.config.runtime
            )
        except NoSuchRun as e:
            return json_error(404, "unknown_run", str(e))
        return encoded(report)

    async def runs(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        limit = _number(request, "limit", 1, RUNS_LIMIT, default=20)
        assert service.ledger is not None and limit is not None
        try:
            listing = await asyncio.to_thread(
                runs_of, service.ledger, service.view(RunsView), agent_id, limit
            )
        except UnknownAgent as e:
            message = await asyncio.to_thread(with_known_agents, service.ledger, e)
            return json_error(404, "unknown_agent", message)
        return encoded(listing)

    async def schedules(request: web.Request) -> web.Response:
        agent_id = request.match_info.get("agent_id")
        every = request.query.get("all") == "1"
        assert service.ledger is not None
        listing = await asyncio.to_thread(
            schedules_of, service.ledger, service.view(SchedulesView), agent_id, every
        )
        if agent_id is None:  # every agent's: those the principal may read
            listing = seen_schedules(caller(), listing)
        return encoded(listing)

    async def ledger(request: web.Request) -> web.Response:
        after = _number(request, "after", 0, default=0)
        limit = _number(request, "limit", 1)
        assert service.ledger is not None and after is not None
        page = await asyncio.to_thread(
            ledger_page, service.ledger, request.match_info["agent_id"], after, limit
        )
        return encoded(page)

    async def manifest(request: web.Request) -> web.Response:
        run_no, step = _number(request, "run_no", 1), _number(request, "step", 1)
        assert service.ledger is not None and run_no is not None
        agent_id = request.match_info["agent_id"]
        try:
            found = await asyncio.to_thread(explain_run, service.ledger, agent_id, run_no, step)
        except NotRecorded as e:
            return json_error(404, "unknown_run", str(e))
        return encoded(found)

    return [
        web.get(MEMORY, memory),
        web.get(LEDGER, ledger),
        web.get(MANIFEST, manifest),
        web.post(VERIFY, verify),
        web.get(RUNS, runs),
        web.get(SCHEDULES, schedules),
        web.get(AGENT_SCHEDULES, schedules),
    ]
