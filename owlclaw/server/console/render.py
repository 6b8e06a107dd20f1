"""Pages are Jinja2 templates rendered with autoescaping: ledger payloads are attacker-controlled
text, so every value is escaped unless a template says otherwise (only memory.html does, for
MEMORY.md, which markdown-it-py has rendered with raw HTML off:
``owlclaw.server.console.markdown``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from owlclaw.access.authorize import Action, Principal, authorize
from owlclaw.server.service import Service

TEMPLATES = Path(__file__).parent / "templates"
ENVIRONMENT = web.AppKey("console_environment", jinja2.Environment)
SERVICE = web.AppKey("console_service", Service)
CLOSING = web.AppKey("console_closing", asyncio.Event)
"""Set when the server shuts down: live pages stop streaming (else shutdown waits for them)."""
PRINCIPAL = web.RequestKey("console_principal", Principal)
"""Who the request's session is of (``owlclaw.server.console.auth``), shown on every page."""


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(
    request: web.Request, template: str, *, status: int = 200, **context: Any
) -> web.Response:
    """``template`` filled with ``context``, plus what base.html needs: the principal and the
    agent the navigation links to (the page's ``agent``, else the first served one it may
    read)."""
    service = request.app[SERVICE]
    principal = request.get(PRINCIPAL)
    readable = (
        a
        for a in service.apps
        if principal is not None and authorize(principal, Action.READ_LEDGER, a) is None
    )
    context.setdefault("agent", next(readable, None))
    html = (
        request.app[ENVIRONMENT]
        .get_template(template)
        .render(principal=request.get(PRINCIPAL), path=request.path, **context)
    )
    return web.Response(text=html, status=status, content_type="text/html")


def render_fragment(request: web.Request, template: str, **context: Any) -> str:
    """A piece of a page (e.g. one timeline step sent live), escaped like the pages."""
    return request.app[ENVIRONMENT].get_template(template).render(**context)
