"""What each console page and action needs: the same actions and ``authorize()`` as the webhook.

A page or action on one agent needs its action's role on that agent (its route's agent, or an
approval's). The two lists (agents, approvals) are open to every logged-in principal and show
only the agents in its scope. A route missing here is the server token's alone, so a new page
is closed to principals until it is given its action. A refused page is a 403 page naming the
missing role, a refused API call the webhook's JSON 403; nothing is recorded either way.
"""

from __future__ import annotations

from aiohttp import web

from events.agent_state import UnknownApproval
from owlclaw.access.authorize import Action, Principal, Refusal, authorize, bootstrap
from owlclaw.server.console.render import SERVICE, render
from owlclaw.server.guard import agent_of, route_of

LISTED = None
"""A list page: every principal sees the agents in its scope on it."""

ROUTES: dict[tuple[str, str], Action | None] = {
    ("GET", "/ui/"): LISTED,
    ("GET", "/ui/approvals"): LISTED,
    ("POST", "/ui/logout"): LISTED,
    ("GET", "/ui/overview"): Action.READ_METRICS,
    ("GET", "/ui/projections"): Action.READ_STATUS,
    ("GET", "/ui/agents/{agent_id}/runs"): Action.READ_RUNS,
    ("GET", "/ui/agents/{agent_id}/runs/{run_id}"): Action.READ_RUNS,
    ("GET", "/ui/api/agents/{agent_id}/runs/{run_id}/events"): Action.READ_RUNS,
    ("GET", "/ui/ledger/{agent_id}"): Action.READ_LEDGER,
    ("GET", "/ui/memory/{agent}"): Action.READ_MEMORY,
    ("GET", "/ui/schedules/{agent}"): Action.READ_STATUS,
    ("POST", "/ui/schedules/{agent}/{schedule_id}/cancel"): Action.SCHEDULES,
    ("POST", "/ui/approvals/{approval_id}"): Action.ANSWER_APPROVAL,
}
"""(method, route) -> the action it does; the overview and projections pages are about every
agent (an unscoped grant is needed)."""


def may(principal: Principal, action: Action, agent_id: str | None) -> bool:
    return authorize(principal, action, agent_id) is None


def _refused(request: web.Request, refusal: Refusal) -> web.Response:
    if request.path.startswith("/ui/api/"):
        return web.json_response(refusal.body(), status=403)  # as the webhook answers
    return render(request, "forbidden.html", status=403, refusal=refusal, agent=None)


async def refusal(request: web.Request, principal: Principal) -> web.StreamResponse | None:
    """The answer refusing ``principal`` this request, or None when it may make it."""
    key = route_of(request)
    if key is None or request.match_info.http_exception is not None:
        return None  # no such page: aiohttp's 404 / 405
    if key not in ROUTES:
        if principal == bootstrap():
            return None
        raise web.HTTPForbidden(text=f"{request.path} is open to the server token only")
    action = ROUTES[key]
    if action is None:
        return None
    try:
        agent_id = await agent_of(request.app[SERVICE], request)
    except UnknownApproval as e:
        raise web.HTTPNotFound(text=str(e)) from e
    refused = authorize(principal, action, agent_id)
    return None if refused is None else _refused(request, refused)
