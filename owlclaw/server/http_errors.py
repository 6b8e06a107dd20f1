"""Every error the webhook answers is JSON ``{"error", "code"}``: aiohttp's own refusals (no
route, wrong method, a body over the size limit) included, and an unexpected exception too, so a
client parses one format and a traceback never reaches it (it goes to the log)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

log = logging.getLogger(__name__)

CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    431: "headers_too_large",
}
"""The code of an aiohttp HTTPException by status; any other status is ``http_error``."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": message, "code": code}, status=status)


def encoded(value: object) -> web.Response:
    """An answer encoded by msgspec: structs, datetimes and UUIDs, which ``web.json_response``'s
    ``json.dumps`` cannot encode."""
    return web.Response(body=msgspec.json.encode(value), content_type="application/json")


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The outermost middleware: turns what escapes the handlers into a JSON error."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400 or e.content_type == "application/json":
            raise  # a redirect, or an error that is JSON already
        return json_error(e.status, CODES.get(e.status, "http_error"), e.text or e.reason)
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return json_error(500, "internal_error", "the server failed; see its log")
