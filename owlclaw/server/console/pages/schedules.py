"""The schedules page: an agent's active and past schedules (the schedules view, as
``owlclaw schedules --all`` lists them) and an operator's cancel, recorded with who did it."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from aiohttp import web

from events.agent_state import UnknownSchedule
from owlclaw.messages import CancelSchedule
from owlclaw.reports.inspection import schedules_of
from owlclaw.server.console.auth import principal_of
from owlclaw.server.console.flash import redirect_with, shown, take_flash
from owlclaw.server.console.render import render
from owlclaw.server.service import Service
from projections import SchedulesView

ACTIVE = ("requested", "registered")
MAX_REASON = 500


def routes(service: Service) -> list[web.RouteDef]:
    async def schedules(request: web.Request) -> web.Response:
        agent = request.match_info["agent"]
        service.served(agent)
        assert service.ledger is not None
        view = service.view(SchedulesView)
        listing = await asyncio.to_thread(schedules_of, service.ledger, view, agent, True)
        flash = take_flash(request)
        response = render(
            request,
            "schedules.html",
            agent=agent,
            active=[r for r in listing.rows if r["status"] in ACTIVE],
            past=[r for r in listing.rows if r["status"] not in ACTIVE],
            behind=listing.behind,
            max_reason=MAX_REASON,
            flash=flash,
        )
        return shown(response, flash)

    async def cancel(request: web.Request) -> web.Response:
        agent = request.match_info["agent"]
        schedule_id = request.match_info["schedule_id"]
        service.served(agent)
        form = await request.post()
        reason = str(form.get("reason", "")).strip()
        by = principal_of(request).name
        back = f"/ui/schedules/{quote(agent, safe='')}"
        if len(reason) > MAX_REASON:
            raise redirect_with(
                back, f"not cancelled: the reason is over {MAX_REASON} characters", ok=False
            )
        try:
            message = CancelSchedule(agent_id=agent, schedule_id=schedule_id, by=by, reason=reason)
            position = await service.ask(message)
        except UnknownSchedule as e:
            raise redirect_with(back, f"not cancelled: {e}", ok=False) from e
        raise redirect_with(
            back, f"cancelled {schedule_id} as {by} (log position {position})", ok=True
        )

    return [
        web.get("/schedules/{agent}", schedules),
        web.post("/schedules/{agent}/{schedule_id}/cancel", cancel),
    ]
