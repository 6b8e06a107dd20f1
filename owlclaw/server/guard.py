"""The webhook's guard: who a request is (the server token, or a principal's token), and whether
that principal may do what the route does, on the agent it names, before anything is read or
recorded.

Each route's action is in ``ROUTES``; a route listing every agent's (``LISTS``) lets in a
principal with the action's role on some agents, and its handler shows it those
(``owlclaw.server.seen``). The MCP and A2A apps (``per_call``) authorize each call themselves,
one request carrying several kinds of call: they get the principal as ``caller()``. Any other
route is open to the server token alone, so a new route is closed to principals until it is
given its action. A refusal is a JSON 403 naming the missing role and the agent
(``owlclaw.access.authorize``)."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from events import UnknownAgent
from events.agent_state import UnknownApproval
from owlclaw.a2a.paths import PREFIX as A2A_PREFIX
from owlclaw.a2a.paths import is_card_path
from owlclaw.access.authorize import Action, Principal, authorize, authorize_some, bootstrap
from owlclaw.access.caller import calling_as
from owlclaw.server import inspection
from owlclaw.server.http_errors import json_error
from owlclaw.server.metrics_route import PATH as METRICS_PATH
from owlclaw.server.mounts import MCP_PATH
from owlclaw.server.service import NotServed, Service

ROUTES: dict[tuple[str, str], Action] = {
    ("POST", "/agents/{agent_id}/trigger"): Action.TRIGGER,
    ("POST", "/agents/{agent_id}/events"): Action.SEND_EVENT,
    ("POST", "/agents/{agent_id}/fires"): Action.FIRE,
    ("POST", "/agents/{agent_id}/activate"): Action.FIRE,
    ("POST", "/agents/{agent_id}/tools"): Action.TOOLS,
    ("GET", "/approvals"): Action.READ_APPROVALS,
    ("POST", "/approvals/{approval_id}"): Action.ANSWER_APPROVAL,
    ("GET", "/status"): Action.READ_STATUS,
    ("GET", inspection.MEMORY): Action.READ_MEMORY,
    ("POST", inspection.VERIFY): Action.READ_RUNS,
    ("GET", inspection.RUNS): Action.READ_RUNS,
    ("GET", inspection.LEDGER): Action.READ_LEDGER,
    ("GET", inspection.MANIFEST): Action.READ_RUNS,
    ("GET", inspection.SCHEDULES): Action.READ_RUNS,
    ("GET", inspection.AGENT_SCHEDULES): Action.READ_RUNS,
    ("GET", METRICS_PATH): Action.READ_METRICS,
}
"""(method, route) -> the action it does; its agent is the route's ``agent_id``, an approval's
agent, or none (the whole server: an unscoped grant is needed, except on ``LISTS``)."""

LISTS = frozenset({("GET", "/approvals"), ("GET", "/status"), ("GET", inspection.SCHEDULES)})
"""Routes listing every agent's: shown, filtered, to a principal with the role on some agents."""


def per_call(path: str) -> bool:
    """An ASGI app's path whose app authorizes each call (MCP: each tool; A2A: each method)."""
    return path == MCP_PATH or path.startswith(f"{A2A_PREFIX}/")


PRINCIPAL = web.RequestKey("principal", Principal)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def principal_of(request: web.Request) -> Principal:
    """The authenticated principal of a request the guard let through."""
    return request[PRINCIPAL]


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def route_of(request: web.Request) -> tuple[str, str] | None:
    """(method, canonical route); None for an ASGI app's (MCP, A2A)."""
    route = request.match_info.route
    resource = None if route is None else route.resource
    if resource is None:
        return None
    return ("GET" if request.method == "HEAD" else request.method, resource.canonical)


async def agent_of(service: Service, request: web.Request) -> str | None:
    """The agent the request acts on (None: the whole server): the route's ``agent_id`` (the
    console's ``agent``), or its approval's agent (UnknownApproval)."""
    info = request.match_info
    if "approval_id" in info:
        return await service.approval_agent(info["approval_id"])
    return info.get("agent_id") or info.get("agent")


def guard(service: Service, token: str) -> Middleware:
    """A request other than the console's (it checks its own session), /health's, an A2A
    card's and an open /metrics' is authenticated and authorized, and served only once the
    service has started."""
    expected = token.encode()
    tokenless = set() if service.config.server.metrics_need_token else {METRICS_PATH}

    def unauthorized() -> web.Response:
        return json_error(401, "unauthorized", "missing or wrong bearer token")

    def starting() -> web.Response:
        return json_error(503, "starting", "the service is still starting; try again")

    async def admit(request: web.Request) -> Principal | web.Response:
        """The request's principal, or the answer that it has none (yet)."""
        given = _bearer(request)
        if not given:
            return unauthorized()
        if hmac.compare_digest(given.encode(), expected):
            return bootstrap() if service.ready else starting()
        if not service.ready or service.principals is None:
            return starting()  # a principal's token is looked up once the service has started
        principal = await asyncio.to_thread(service.principals.authenticate, given)
        return unauthorized() if principal is None else principal

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path == "/ui" or path.startswith("/ui/") or path == "/health" or is_card_path(path):
            return await _served(request, handler)  # the console checks its own session
        if path in tokenless:
            return await _served(request, handler) if service.ready else starting()
        admitted = await admit(request)
        if isinstance(admitted, web.Response):
            return admitted
        refused = await _refusal(service, request, admitted)
        if refused is not None:
            return refused
        request[PRINCIPAL] = admitted
        with calling_as(admitted):
            return await _served(request, handler)

    return middleware


async def _refusal(
    service: Service, request: web.Request, principal: Principal
) -> web.Response | None:
    route = route_of(request)
    action = None if route is None else ROUTES.get(route)
    if action is None:
        if principal == bootstrap() or request.match_info.http_exception is not None:
            return None  # the server token's routes; or no route: aiohttp's 404 / 405
        if route is None and per_call(request.path):
            return None  # its app authorizes each call
        return json_error(403, "forbidden", f"{request.path} is open to the server token only")
    if route in LISTS:
        refusal = authorize_some(principal, action)
    else:
        try:
            agent_id = await agent_of(service, request)
        except UnknownApproval as e:
            return json_error(404, "unknown_approval", str(e))
        refusal = authorize(principal, action, agent_id)
    return None if refusal is None else web.json_response(refusal.body(), status=403)


async def _served(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except (NotServed, UnknownAgent) as e:
        return json_error(404, "unknown_agent", str(e))
