"""The console's login: a token once (the server's, or a principal's), then a session cookie that
names the principal without holding the token (``owlclaw.server.console.session``).

Who is shown and recorded is the token's principal (the server's token is ``server-token``, the
bootstrap admin), never a typed name. The cookie is HttpOnly, SameSite=Strict and scoped to
``/ui``; state-changing requests must also come from this origin (Origin, else Referer), so
another site cannot post through a logged-in browser. Every page then asks
``owlclaw.server.console.access`` whether its principal may see or do it.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from owlclaw.access.authorize import Principal, bootstrap
from owlclaw.access.tokens import token_sha256
from owlclaw.server.console import access
from owlclaw.server.console.render import PRINCIPAL, SERVICE, render
from owlclaw.server.console.session import issue, token_digest

SESSION_COOKIE = "owlclaw_session"
TOKEN_KEY = web.AppKey("console_token", str)
SESSION_KEY = web.AppKey("console_session_key", bytes)
OPEN_PATHS = ("/ui/login", "/ui/static/")
"""Reachable without a session: the login form and the files it needs."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Starting(Exception):
    """A principal's token cannot be looked up before the service has started."""


def principal_of(request: web.Request) -> Principal:
    """Who is logged in on this request: recorded as ``by`` on what they do here."""
    return request[PRINCIPAL]


async def _holder(request: web.Request, digest: str) -> Principal | None:
    """The live principal whose token has ``digest``: the server token's, else the store's."""
    if hmac.compare_digest(digest.encode(), token_sha256(request.app[TOKEN_KEY]).encode()):
        return bootstrap()
    service = request.app[SERVICE]
    if not service.ready or service.principals is None:
        raise Starting
    return await asyncio.to_thread(service.principals.holding, digest)


async def _session(request: web.Request) -> Principal | None:
    digest = token_digest(request.app[SESSION_KEY], request.cookies.get(SESSION_COOKIE, ""))
    return None if digest is None else await _holder(request, digest)


def _same_origin(request: web.Request) -> bool:
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    return urlsplit(source).netloc == request.host


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Pages need a live session (else the login form; the API answers 401 JSON) whose
    principal may see or do what the page does; every state-changing request must come from
    the console's own origin."""
    if request.method not in SAFE_METHODS and not _same_origin(request):
        return web.json_response(
            {"error": "cross-origin request refused", "code": "forbidden"}, status=403
        )
    if not request.path.startswith(OPEN_PATHS):
        try:
            principal = await _session(request)
        except Starting as e:
            raise web.HTTPServiceUnavailable(text="the service is still starting; reload") from e
        if principal is None:
            if request.path.startswith("/ui/api/"):
                return web.json_response(
                    {"error": "log in at /ui/login", "code": "unauthorized"}, status=401
                )
            raise web.HTTPFound("/ui/login")
        request[PRINCIPAL] = principal
        refused = await access.refusal(request, principal)
        if refused is not None:
            return _secured(refused)
    return _secured(await handler(request))


def _secured(response: web.StreamResponse) -> web.StreamResponse:
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    )
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


async def login_form(request: web.Request) -> web.Response:
    return render(request, "login.html", error=None)


async def login(request: web.Request) -> web.Response:
    form = await request.post()
    token = str(form.get("token", "")).strip()
    try:
        principal = await _holder(request, token_sha256(token)) if token else None
    except Starting:
        return render(
            request, "login.html", status=503, error="the service is still starting; try again"
        )
    if principal is None:
        error = "wrong token: use your principal's token, or the server's token"
        return render(request, "login.html", status=401, error=error)
    response = web.HTTPSeeOther("/ui/")
    value = issue(request.app[SESSION_KEY], token)
    response.set_cookie(SESSION_COOKIE, value, path="/ui", httponly=True, samesite="Strict")
    raise response


async def logout(_: web.Request) -> web.Response:
    response = web.HTTPSeeOther("/ui/login")
    response.del_cookie(SESSION_COOKIE, path="/ui")
    raise response


def routes() -> list[web.RouteDef]:
    return [
        web.get("/login", login_form),
        web.post("/login", login),
        web.post("/logout", logout),
    ]
