"""The run page's live timeline, as server-sent events to one browser.

Each of the run's events as it is committed (``projections.feed.afollow_run``, as ``owlclaw
trigger`` follows a run), rendered by the same template as an escaped HTML fragment (``step``,
whose id is the event's version, so a browser that reconnects with ``Last-Event-ID`` gets only
what it has not shown yet). A message the run sent is shown with its delivery, and that part is
sent again (``delivery``) once the outbox settles it; ``end`` follows the run's end and the
settling of its messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from aiohttp import web

from events import catalog as ev
from owlclaw.server.console.outcomes import RunOutcomes
from owlclaw.server.console.render import SERVICE, render_fragment
from owlclaw.server.console.steps import delivery_of
from projections.feed import afollow_run

FOLLOW_S = 24 * 3600.0
"""How long one stream follows a run that has not ended (a parked run can wait for days)."""
POLL_S = 0.2
DELIVERY_POLL_S = 0.5
"""How often a stream asks the outbox about the messages it shows as not delivered yet."""


class RunStream:
    def __init__(
        self, request: web.Request, response: web.StreamResponse, run_id: uuid.UUID, shown: int
    ):
        self.request = request
        self.response = response
        self.run_id = run_id
        self.shown = shown
        """The last version the browser has (its ``Last-Event-ID``)."""
        self.outcomes = RunOutcomes(request.app[SERVICE], run_id)
        self.writing = asyncio.Lock()
        self.ended = asyncio.Event()

    async def send(self) -> None:
        watching = asyncio.ensure_future(self._deliveries())
        try:
            await self._follow()
            await watching
        finally:
            watching.cancel()
        await self._emit("end", "")

    async def _emit(self, kind: str, html: str, event_id: int | None = None) -> None:
        data = "".join(f"data: {line}\n" for line in html.splitlines()) or "data: \n"
        head = f"id: {event_id}\n" if event_id is not None else ""
        async with self.writing:
            await self.response.write(f"{head}event: {kind}\n{data}\n".encode())

    async def _follow(self) -> None:
        ledger = self.request.app[SERVICE].ledger
        assert ledger is not None
        outcomes = self.outcomes
        async for event in afollow_run(ledger, str(self.run_id), poll_s=POLL_S, timeout_s=FOLLOW_S):
            answered = outcomes.track(event)
            if event.originator_version <= self.shown:
                if isinstance(event, ev.MessageSent):  # the page may show it pending
                    outcomes.shown(delivery_of(event.message_id, None))
                continue
            step = await asyncio.to_thread(outcomes.step, event, answered)
            html = render_fragment(self.request, "step.html", step=step)
            await self._emit("step", html, step.version)
            if step.delivery is not None:
                outcomes.shown(step.delivery)
        self.ended.set()

    async def _deliveries(self) -> None:
        """Until the run has ended and none of its messages waits for the outbox."""
        outcomes = self.outcomes
        while not self.ended.is_set() or outcomes.pending:
            pending = sorted(outcomes.pending)
            for delivery in await asyncio.to_thread(outcomes.deliveries, pending):
                if delivery.status != "pending":
                    html = render_fragment(self.request, "delivery.html", delivery=delivery)
                    await self._emit("delivery", html)
                outcomes.shown(delivery)
            if self.ended.is_set():
                await asyncio.sleep(DELIVERY_POLL_S)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ended.wait(), DELIVERY_POLL_S)
