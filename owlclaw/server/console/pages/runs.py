"""An agent's runs, and one run as a live timeline (filled by server-sent events:
``owlclaw.server.console.stream``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from aiohttp import web

from events import UnknownRun
from owlclaw import tracing
from owlclaw.server.console.render import CLOSING, SERVICE, render
from owlclaw.server.console.stream import RunStream
from owlclaw.server.service import Service
from projections import RunsView

RUNS_PAGE = 50
WATCH_S = 0.5
"""How often a stream checks that its browser is still there and the server not stopping."""
TRACE_URL_S = 2.0
"""How long the run page waits for Langfuse to name the trace's project (its first link only)."""


def run_of(service: Service, agent_id: str, run: str) -> uuid.UUID:
    """The id of one of the agent's runs (404 for anything else)."""
    service.served(agent_id)
    assert service.ledger is not None
    try:
        run_id = uuid.UUID(run)
    except ValueError as e:
        raise web.HTTPNotFound(text=f"no run {run!r}") from e
    if run_id not in service.ledger.load_agent(agent_id).run_ids():
        raise web.HTTPNotFound(text=f"{agent_id} has no run {run_id}")
    return run_id


def plan_of(service: Service, run_id: uuid.UUID) -> list[dict[str, str]]:
    """The run's plan as it last set it; none yet for a run accepted but not started (its
    agent has queued it, so its own stream has no events until it starts)."""
    assert service.ledger is not None
    try:
        return service.ledger.load_run(run_id).state.plan
    except UnknownRun:
        return []


async def trace_link(run_id: uuid.UUID) -> str | None:
    """The run's trace in Langfuse when tracing is on; the page goes without the link when
    Langfuse does not answer in time."""
    if not tracing.enable_langfuse():
        return None
    try:
        return await asyncio.wait_for(asyncio.to_thread(tracing.trace_url, run_id), TRACE_URL_S)
    except TimeoutError:
        return None


def routes(service: Service) -> list[web.RouteDef]:
    async def runs(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        before = request.query.get("before", "")
        if before and not before.isdigit():
            raise web.HTTPBadRequest(text="before: a run number")
        found = await asyncio.to_thread(
            service.view(RunsView).of_agent, agent_id, RUNS_PAGE, int(before) if before else None
        )
        older = found[-1].run_no if len(found) == RUNS_PAGE else None
        return render(request, "runs.html", agent=agent_id, runs=found, older=older)

    async def run(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        run_id = await asyncio.to_thread(run_of, service, agent_id, request.match_info["run_id"])
        plan = await asyncio.to_thread(plan_of, service, run_id)
        trace = await trace_link(run_id)
        return render(
            request, "run.html", agent=agent_id, run_id=str(run_id), trace=trace, plan=plan
        )

    return [
        web.get("/agents/{agent_id}/runs", runs),
        web.get("/agents/{agent_id}/runs/{run_id}", run),
        web.get("/api/agents/{agent_id}/runs/{run_id}/events", events),
    ]


async def events(request: web.Request) -> web.StreamResponse:
    """The run's steps as server-sent events, from the version after ``Last-Event-ID``, until
    the run has ended, the browser has gone or the server stops."""
    service = request.app[SERVICE]
    agent_id = request.match_info["agent_id"]
    run_id = await asyncio.to_thread(run_of, service, agent_id, request.match_info["run_id"])
    last = request.headers.get("Last-Event-ID", "")
    shown = int(last) if last.isdigit() else 0
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    stream = RunStream(request, response, run_id, shown)
    sending = asyncio.ensure_future(stream.send())
    closing = request.app[CLOSING]
    try:  # stop following once the browser has gone (the feed itself only polls the ledger)
        while not sending.done():
            await asyncio.wait({sending}, timeout=WATCH_S)
            gone = request.transport is None or request.transport.is_closing()
            if gone or closing.is_set():
                sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionResetError, TimeoutError):
            await sending
    finally:
        sending.cancel()
    return response
