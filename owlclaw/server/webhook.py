"""The HTTP endpoint of ``owlclaw run`` (aiohttp), on loopback by default.

- ``POST /agents/{id}/trigger`` ``{"focus"?, "payload"?, "wait"?}``: a run (trigger ``webhook``),
  answered once its RunQueued is committed (202), or when it ended with ``"wait": true`` (200);
  an ``Idempotency-Key`` header makes a retry return the run that key already started; a W3C
  ``traceparent`` header makes the run's trace continue the caller's (``owlclaw.tracing``);
- ``POST /agents/{id}/events`` ``{"source"?, "payload"?}``: an InboundReceived for the agent's
  next heartbeat (202); a source ``agent:...`` is refused (only send_to_agent writes those);
- ``POST /agents/{id}/tools`` ``{"enable"?: [names], "disable"?: [names]}``: a ToolsChanged
  recorded by the agent's writer, naming the principal as ``by`` (200, the agent's disabled
  tools; 400 ``unknown_tool``);
- ``POST /agents/{id}/fires`` (a ``Fire``): a timer delivery from the Hatchet worker when the
  agents live in this process; answered with the agent's verdict (200);
- ``POST /agents/{id}/activate``: the agent made ready (rebuilt from the ledger if it was
  passivated), asked by the Hatchet worker while a fire waits for its time (200, ``{"ms"}``);
- ``GET /approvals``: the served agents' pending approvals (a principal's: of the agents its
  grants cover);
- ``POST /approvals/{id}`` ``{"decision": "approve"|"deny", "digest", "by"?, "note"?,
  "arguments"?}`` (a question, ``kind`` ``question``: ``{"answer": "...", "digest", "by"?}``): a
  person's answer for the arguments of ``digest`` (the pending approval's, as
  ``GET /approvals`` lists it), recorded by the agent's writer; the parked run resumes once the
  approvals its tool requires are given (200). Refused, with nothing recorded: 404
  ``unknown_approval``; 400 ``invalid_answer`` (an answer outside the question's options or
  over its length, a decision for a question, an answer for a call); 409 ``approval_closed``
  (already answered or expired),
  ``digest_mismatch`` (another digest than the arguments it shows), ``same_approver`` (a second
  grant by the same principal); 403 ``self_approval`` (answered as the agent or an agent of its
  spawn tree), ``forbidden`` (no ``approver`` on the agent); 400 ``invalid_arguments`` for edited
  arguments outside the tool's schema;
- ``GET /agents/{id}/memory?recall=TEXT&k=N`` and ``POST /agents/{id}/runs/{n}/verify``: what
  ``owlclaw memory --recall`` and ``replay --verify`` ask a running server
  (``owlclaw.server.inspection``);
- ``GET /status``: the served agents (a principal's: those its grants cover); ``GET /health``:
  liveness and readiness (``{"ok": true, "ready"}``), answered without a token;
- ``GET /metrics``: Prometheus' text format (owlclaw.server.metrics), without a token too unless
  ``server.metrics_need_token`` (by default: when the server is not bound to loopback);
- ``/mcp``: MCP over streamable HTTP, each tool call authorized (``owlclaw.server.mcp_server``);
- ``/a2a/{id}`` (A2A JSON-RPC, each method authorized) and
  ``/a2a/{id}/.well-known/agent-card.json`` (its card, without a token): each served agent as an
  A2A agent (``owlclaw.a2a``);
- ``/ui/...``: the web console (``owlclaw.server.console``), behind its own login with the same
  tokens and roles.

Until the service has started, calls are answered 503 ``starting``.

Every other request carries ``Authorization: Bearer <token>``: the server's token (every role on
every agent), or a principal's (``owlclaw principals``), whose roles must allow the route's
action on its agent, else a JSON 403 naming the missing role, and nothing is recorded
(``owlclaw.server.guard``). An approval answered with a principal's token is recorded as
answered by that principal. Errors are JSON ``{"error", "code"}`` with a 4xx status, also
aiohttp's own (``owlclaw.server.http_errors``); a body is refused before anything is recorded
(``owlclaw.server.request_body``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import msgspec
from aiohttp import web

from events.agent_state import ApprovalClosed, UnknownTools
from owlclaw.access.authorize import BOOTSTRAP
from owlclaw.config import OwlClawConfig
from owlclaw.messages import Activate, ChangeTools, Decision, Fire, Receive, Result, Submit
from owlclaw.reports.approvals import approvals_of
from owlclaw.reports.status import ledger_status
from owlclaw.runtime.approvals import ToolArgumentsInvalid
from owlclaw.server import inspection
from owlclaw.server.approval_refusals import refusal_of
from owlclaw.server.console import make_console
from owlclaw.server.guard import guard, principal_of
from owlclaw.server.http_errors import encoded, json_errors
from owlclaw.server.http_errors import json_error as _error
from owlclaw.server.metrics_route import metrics_route
from owlclaw.server.mounts import mount_a2a, mount_mcp
from owlclaw.server.request_body import BadBody, decode_body
from owlclaw.server.seen import seen_approvals, seen_listing, seen_status, sees_every_status
from owlclaw.server.service import Service
from owlclaw.server_token import server_token
from owlclaw.tools.agent_mail import SOURCE_PREFIX

MAX_BODY_BYTES = 1024 * 1024
MAX_IDEMPOTENCY_KEY = 200
MAX_TRACEPARENT = 256


class TriggerBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    focus: str | None = None
    payload: dict[str, Any] = {}
    wait: bool = False


class ToolsBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    enable: list[str] = []
    disable: list[str] = []


class AnswerBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A call's ``decision``, or a question's ``answer``: one of the two."""

    decision: Literal["approve", "deny"] | None = None
    answer: str | None = None
    digest: str = ""
    """The digest of the arguments answered for, as the pending approval lists it."""
    by: str | None = None
    """Who answers, for the server token's caller (default ``webhook``); a principal answers
    as itself, and may leave it out."""
    note: str = ""
    arguments: dict[str, Any] | None = None


class EventBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    source: str = "webhook"
    payload: dict[str, Any] = {}


def _traceparent(request: web.Request) -> str | None:
    """The caller's W3C ``traceparent``, kept with the run (bounded, printable; the tracing
    backend parses it, and ignores one that is not valid, as W3C says)."""
    value = request.headers.get("traceparent")
    if value is None or not (0 < len(value) <= MAX_TRACEPARENT and value.isprintable()):
        return None
    return value


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


async def _body(request: web.Request, kind: type[Any]) -> Any:
    try:
        return decode_body(await request.read(), kind)
    except BadBody as e:
        raise web.HTTPBadRequest(
            text=_json({"error": str(e), "code": "bad_request"}), content_type="application/json"
        ) from e


def _approval_routes(service: Service) -> list[web.RouteDef]:
    async def approvals(request: web.Request) -> web.Response:
        principal = principal_of(request)
        if request.query.get("ledger") == "1":  # owlclaw approvals: the ledger's agents too
            assert service.ledger is not None
            listing = await asyncio.to_thread(
                approvals_of, service.ledger, request.query.get("agent"), list(service.apps)
            )
            return encoded(seen_listing(principal, listing))
        found = await asyncio.to_thread(service.pending_approvals)
        return web.json_response(msgspec.to_builtins(seen_approvals(principal, found)))

    async def answer(request: web.Request) -> web.Response:
        data: AnswerBody = await _body(request, AnswerBody)
        approval_id = request.match_info["approval_id"]
        principal = principal_of(request)
        if principal.name == BOOTSTRAP:
            by = data.by or "webhook"
        elif data.by in (None, principal.name):
            by = principal.name
        else:
            return _error(
                400, "bad_request", f"you answer as principal {principal.name!r}: leave out 'by'"
            )
        if (data.decision is None) == (data.answer is None):
            return _error(
                400,
                "bad_request",
                "send 'decision' (approve or deny) for a call, or 'answer' for a question",
            )
        try:
            approve = data.answer is not None or data.decision == "approve"
            decision = Decision(
                approval_id, approve, by, data.note, data.arguments, data.digest, None, data.answer
            )
            answered = await service.answer_approval(decision, principal)
        except ApprovalClosed as e:
            status, code = refusal_of(e)
            return _error(status, code, str(e))
        except ToolArgumentsInvalid as e:
            return _error(400, "invalid_arguments", str(e))
        return web.json_response(msgspec.to_builtins(answered))

    return [web.get("/approvals", approvals), web.post("/approvals/{approval_id}", answer)]


def make_app(service: Service, token: str) -> web.Application:
    async def submit(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        data: TriggerBody = await _body(request, TriggerBody)
        key = request.headers.get("Idempotency-Key")
        if key is not None and not (0 < len(key) <= MAX_IDEMPOTENCY_KEY and key.isprintable()):
            return _error(
                400,
                "bad_request",
                f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY} printable characters",
            )
        message = Submit(
            agent_id=agent_id,
            trigger="webhook",
            focus=data.focus,
            payload=data.payload,
            idempotency_key=key,
            traceparent=_traceparent(request),
            by=principal_of(request).name,
        )
        run_id = await service.ask(message)
        if not data.wait:
            return web.json_response({"agent_id": agent_id, "run_id": run_id}, status=202)
        result = msgspec.to_builtins(await service.ask(Result(agent_id=agent_id, run_id=run_id)))
        return web.json_response({"agent_id": agent_id, "run_id": run_id, "result": result})

    async def fire(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        message: Fire = await _body(request, Fire)
        if message.agent_id != agent_id:
            return _error(
                400, "bad_request", f"the fire is for {message.agent_id!r}, not {agent_id!r}"
            )
        outcome = await service.ask(message)
        return web.json_response(msgspec.to_builtins(outcome))

    async def activate(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        ms = await service.ask(Activate(agent_id=agent_id))
        return web.json_response({"agent_id": agent_id, "ms": ms})

    async def receive(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        data: EventBody = await _body(request, EventBody)
        if data.source.startswith(SOURCE_PREFIX):
            return _error(
                400,
                "bad_request",
                f"source {data.source!r}: {SOURCE_PREFIX!r} is reserved for messages between "
                "agents (send_to_agent), which the ledger links to their sender",
            )
        by = principal_of(request).name
        position = await service.ask(
            Receive(agent_id=agent_id, source=data.source, payload=data.payload, by=by)
        )
        return web.json_response({"agent_id": agent_id, "position": position}, status=202)

    async def change_tools(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        data: ToolsBody = await _body(request, ToolsBody)
        try:
            change = await service.ask(
                ChangeTools(
                    agent_id=agent_id,
                    enable=data.enable,
                    disable=data.disable,
                    by=principal_of(request).name,
                )
            )
        except ValueError as e:
            code = "unknown_tool" if isinstance(e, UnknownTools) else "bad_request"
            return _error(400, code, str(e))
        return web.json_response(msgspec.to_builtins(change))

    async def status(request: web.Request) -> web.Response:
        principal = principal_of(request)
        report = seen_status(principal, await service.report())
        if request.query.get("ledger") == "1" and sees_every_status(principal):
            assert service.ledger is not None
            report["ledger"] = await asyncio.to_thread(
                ledger_status, service.ledger, service.views, report["agents"]
            )
        return encoded(report)

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "ready": service.ready})

    app = web.Application(
        middlewares=[json_errors, guard(service, token)], client_max_size=MAX_BODY_BYTES
    )
    app.add_routes(
        [
            web.post("/agents/{agent_id}/trigger", submit),
            web.post("/agents/{agent_id}/events", receive),
            web.post("/agents/{agent_id}/fires", fire),
            web.post("/agents/{agent_id}/activate", activate),
            web.post("/agents/{agent_id}/tools", change_tools),
            *_approval_routes(service),
            *inspection.routes(service),
            web.get("/status", status),
            web.get("/health", health),
            metrics_route(service),
        ]
    )

    async def console(_: web.Request) -> web.Response:
        raise web.HTTPFound("/ui/")

    mount_a2a(app, service)
    app.router.add_get("/ui", console)
    app.add_subapp("/ui", make_console(service, token))
    mount_mcp(app, service)
    return app


@asynccontextmanager
async def serving(service: Service, config: OwlClawConfig) -> AsyncIterator[None]:
    """The service started and its endpoint listening; both stopped on the way out, also when
    starting fails half-way (the port is taken, Hatchet is unreachable, ...)."""
    token = server_token(config, create=True)
    assert token is not None
    runner = web.AppRunner(make_app(service, token), access_log=None)
    try:
        await runner.setup()  # the port first: a taken port fails before anything starts
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        await service.start()
        yield
    finally:
        await runner.cleanup()
        await service.stop()
