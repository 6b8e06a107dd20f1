"""The console's login: the server's token once, then a session cookie derived from it.

The cookie holds HMAC(token, "console"), never the token; both cookies are HttpOnly,
SameSite=Strict and scoped to ``/ui``. State-changing requests must also come from this origin
(Origin, else Referer), so another site cannot post through a logged-in browser.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from owlclaw.server.console.render import OPERATOR_COOKIE, render

SESSION_COOKIE = "owlclaw_session"
OPERATOR_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
TOKEN_KEY = web.AppKey("console_token", str)
OPEN_PATHS = ("/ui/login", "/ui/static/")
"""Reachable without a session: the login form and the files it needs."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def session_value(token: str) -> str:
    """What the session cookie holds: derived from the token, useless as a bearer token."""
    return hmac.new(token.encode(), b"console", hashlib.sha256).hexdigest()


def operator_of(request: web.Request) -> str:
    """Who does an operator action from this (logged-in) browser, as events record it."""
    return f"console:{request.cookies.get(OPERATOR_COOKIE, 'unknown')}"


def _logged_in(request: web.Request) -> bool:
    given = request.cookies.get(SESSION_COOKIE, "").encode()
    return hmac.compare_digest(given, session_value(request.app[TOKEN_KEY]).encode())


def _same_origin(request: web.Request) -> bool:
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    return urlsplit(source).netloc == request.host


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Pages need a session (else the login form); the API answers 401 JSON; every
    state-changing request must come from the console's own origin."""
    if request.method not in SAFE_METHODS and not _same_origin(request):
        return web.json_response(
            {"error": "cross-origin request refused", "code": "forbidden"}, status=403
        )
    if not request.path.startswith(OPEN_PATHS) and not _logged_in(request):
        if request.path.startswith("/ui/api/"):
            return web.json_response(
                {"error": "log in at /ui/login", "code": "unauthorized"}, status=401
            )
        raise web.HTTPFound("/ui/login")
    response: web.StreamResponse = await handler(request)
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    )
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


async def login_form(request: web.Request) -> web.Response:
    return render(request, "login.html", name="", error=None)


async def login(request: web.Request) -> web.Response:
    form = await request.post()
    token, operator = str(form.get("token", "")), str(form.get("operator", "")).strip()
    error = None
    if not hmac.compare_digest(token.encode(), request.app[TOKEN_KEY].encode()):
        error = "wrong token: use the server's token (server.token in the data directory)"
    elif not OPERATOR_NAME.fullmatch(operator):
        error = "operator name: 1-64 letters, digits, '.', '_', '@' or '-'"
    if error is not None:
        return render(request, "login.html", status=401, name=operator, error=error)
    response = web.HTTPSeeOther("/ui/")
    for name, value in (
        (SESSION_COOKIE, session_value(request.app[TOKEN_KEY])),
        (OPERATOR_COOKIE, operator),
    ):
        response.set_cookie(name, value, path="/ui", httponly=True, samesite="Strict")
    raise response


async def logout(_: web.Request) -> web.Response:
    response = web.HTTPSeeOther("/ui/login")
    for name in (SESSION_COOKIE, OPERATOR_COOKIE):
        response.del_cookie(name, path="/ui")
    raise response


def routes() -> list[web.RouteDef]:
    return [
        web.get("/login", login_form),
        web.post("/login", login),
        web.post("/logout", logout),
    ]
