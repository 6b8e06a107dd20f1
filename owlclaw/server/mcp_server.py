"""OwlClaw as an MCP server: ``owlclaw run`` serves MCP over streamable HTTP at ``/mcp``, so any
MCP client (Claude Desktop, Cursor, ...) can drive and inspect the served agents.

The official SDK's ``MCPServer`` is mounted in the webhook's aiohttp app with ``aiohttp-asgi``
(on the first request to ``/mcp``: ``owlclaw.server.mounts``): the same port, and the webhook's
bearer-token guard in front of it. Every tool is a thin call into
what the webhook, the CLI and the console already use (``Service``, the agent messages, the
approvals, ``memory_of``, the run narration); a refusal (unknown agent, run or approval, an answer
to a closed approval, bad arguments) is an MCP tool error with its message, never a traceback.

Each tool call and resource read is authorized for the caller (the guard's principal) with the
webhook's actions (``TOOLS``), before anything is read or recorded: a refusal is a tool error
naming the missing role. ``tools/list`` shows every tool to every caller: whether a call is
allowed depends on the agent it names (a tenant's operator may trigger its own agents only), so
a filtered list would still need the check on call, and one list per server is what MCP
clients cache.

Stateless with JSON responses: every request stands alone (the tools answer once, nothing is
pushed), so a restarted ``owlclaw run`` does not strand its clients' sessions. The SDK's session
manager still runs from the first request to the aiohttp app's cleanup (in a task of its own,
as the manager's task group needs).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import Field

from events import Ledger, UnknownAgent, UnknownRun
from events.agent_state import ApprovalClosed
from owlclaw.access.authorize import BOOTSTRAP, Action, Principal, authorize, authorize_some
from owlclaw.access.caller import caller
from owlclaw.messages import Decision, Result, Submit
from owlclaw.reports.inspection import MemoryReading, memory_of
from owlclaw.runtime.approvals import ToolArgumentsInvalid
from owlclaw.server.run_timeline import answer_of, run_no_of, run_timeline, timeline_text
from owlclaw.server.seen import seen_approvals, seen_status
from owlclaw.server.service import NotServed, Service
from projections import MemoryView
from projections.recall import MAX_LIMIT, MIN_LIMIT

PRINCIPAL = "mcp"
"""Who answered an approval through MCP with the server token (a principal answers as itself)."""
TRIGGER = "mcp"
"""The trigger of the runs an MCP client starts."""
MAX_TRACEPARENT = 256

TOOLS: dict[str, Action] = {
    "list_agents": Action.READ_STATUS,
    "trigger_run": Action.TRIGGER,
    "read_timeline": Action.READ_RUNS,
    "list_approvals": Action.READ_APPROVALS,
    "answer_approval": Action.ANSWER_APPROVAL,
    "answer_question": Action.ANSWER_APPROVAL,
    "recall_memories": Action.READ_MEMORY,
    "memory_md": Action.READ_MEMORY,
    "timeline_resource": Action.READ_RUNS,
}
"""Each tool's (and resource's) action: a list of every agent's is filtered to the caller's
agents (``owlclaw.server.seen``); any other acts on the agent it names (an approval's agent)."""

REFUSALS = (NotServed, UnknownAgent, UnknownRun, ApprovalClosed, ToolArgumentsInvalid, ValueError)
"""What a caller got wrong: its message is the tool error (ApprovalClosed covers
UnknownApproval; UnknownTools and a recall limit out of range are ValueErrors)."""


def allowed(name: str, agent_id: str | None, error: type[Exception] = ToolError) -> Principal:
    """The caller, when it may use tool ``name`` on ``agent_id`` (None: a list of every agent's,
    which needs the role on some agents); else the SDK's ``error`` with the refusal, which names
    the missing role."""
    principal = caller()
    action = TOOLS[name]
    if agent_id is None:
        refusal = authorize_some(principal, action)
    else:
        refusal = authorize(principal, action, agent_id)
    if refusal is not None:
        raise error(str(refusal))
    return principal


def answerer(principal: Principal) -> str:
    """Who an answer is recorded by: the principal, or ``mcp`` for the server token."""
    return PRINCIPAL if principal.name == BOOTSTRAP else principal.name


@contextmanager
def refused_as(error: type[Exception]) -> Iterator[None]:
    """A refusal as the SDK's ``error``, which the client sees with the refusal's message."""
    try:
        yield
    except REFUSALS as e:
        raise error(str(e)) from e


def traceparent(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> str | None:
    """The caller's W3C ``traceparent``: in the request's ``_meta`` (MCP's convention), else its
    HTTP header; kept with the run when bounded and printable, as the webhook does (the tracing
    backend ignores one that is not valid)."""
    value = (meta or {}).get("traceparent")
    if value is None and headers is not None:
        value = headers.get("traceparent")
    if not (isinstance(value, str) and 0 < len(value) <= MAX_TRACEPARENT and value.isprintable()):
        return None
    return value


def asgi(service: Service) -> tuple[Any, Callable[[], AbstractAsyncContextManager[Any]]]:
    """The MCP endpoint's ASGI handler and its session manager's run, which must be running
    while it serves (``owlclaw.server.mounts`` mounts both at ``/mcp``)."""
    server = make_server(service)
    # Makes the session manager; its own ASGI handler answers at /mcp (the Starlette app would
    # route by the path below its root: none, here).
    server.streamable_http_app(
        stateless_http=True, json_response=True, host=service.config.server.host
    )
    manager = server.session_manager
    return manager.handle_request, manager.run


def make_server(service: Service) -> MCPServer[Any]:
    # The SDK's MCPServer gives the root logger a Rich handler with rich tracebacks unless it
    # has one: keep what Python does without one (warnings and up, the message alone).
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    server: MCPServer[Any] = MCPServer(
        "owlclaw",
        instructions="Drive and inspect the OwlClaw agents this server serves: list them, "
        "trigger runs, read run timelines, answer pending approvals and questions, recall"
        " memories.",
        log_level="WARNING",
    )

    def ledger() -> Ledger:
        assert service.ledger is not None
        return service.ledger

    @server.tool()
    async def list_agents() -> dict[str, Any]:
        """The served agents with their status (runs, pending events, schedules, app errors),
        the placement and the timer backend."""
        principal = allowed("list_agents", None)
        return seen_status(principal, await asyncio.to_thread(service.status))

    @server.tool()
    async def trigger_run(
        ctx: Context,
        agent_id: str,
        focus: Annotated[str | None, Field(description="What the run is about.")] = None,
        payload: Annotated[
            dict[str, Any] | None, Field(description="Data given to the run.")
        ] = None,
        wait: Annotated[
            bool, Field(description="Answer when the run has ended, with its result.")
        ] = False,
    ) -> dict[str, Any]:
        """Start a run of an agent (accepted durably before this answers); with wait, its
        result and answer once it has ended (a run parked for approval waits for the answer)."""
        request = ctx.request_context
        headers = None if request.request is None else request.request.headers
        with refused_as(ToolError):
            principal = allowed("trigger_run", agent_id)
            message = Submit(
                agent_id=agent_id,
                trigger=TRIGGER,
                focus=focus,
                payload=payload,
                traceparent=traceparent(request.meta, headers),
                by=principal.name,
            )
            run_id = await service.ask(message)
        if not wait:
            return {"agent_id": agent_id, "run_id": run_id}
        result = await service.ask(Result(agent_id=agent_id, run_id=run_id))
        events = await asyncio.to_thread(ledger().stream, uuid.UUID(run_id))
        return {
            "agent_id": agent_id,
            "run_id": run_id,
            "result": msgspec.to_builtins(result),
            "answer": answer_of(events),
        }

    def timeline(agent_id: str, run_no: int | None, run_id: str | None) -> dict[str, Any]:
        service.served(agent_id)
        number = run_no_of(ledger(), agent_id, run_no, run_id)
        return run_timeline(ledger(), agent_id, number)

    @server.tool()
    async def read_timeline(
        agent_id: str,
        run_no: Annotated[int | None, Field(description="1 = the agent's first run.")] = None,
        run_id: Annotated[str | None, Field(description="The run's id instead.")] = None,
    ) -> dict[str, Any]:
        """A run's status, totals, answer and its steps, one line each (what `owlclaw trigger`
        narrates); name the run by run_no or run_id."""
        with refused_as(ToolError):
            allowed("read_timeline", agent_id)
            return await asyncio.to_thread(timeline, agent_id, run_no, run_id)

    @server.tool()
    async def list_approvals() -> dict[str, Any]:
        """The served agents' pending approvals: the tool call each parked run waits on."""
        principal = allowed("list_approvals", None)
        found = await asyncio.to_thread(service.pending_approvals)
        return {"approvals": msgspec.to_builtins(seen_approvals(principal, found))}

    @server.tool()
    async def answer_approval(
        approval_id: str,
        decision: Literal["approve", "deny"],
        digest: Annotated[
            str, Field(description="The approval's digest, as list_approvals gives it.")
        ],
        note: str = "",
        arguments: Annotated[
            dict[str, Any] | None,
            Field(description="Edited arguments for the call (approve only)."),
        ] = None,
    ) -> dict[str, Any]:
        """Approve or deny a pending approval, for the arguments of its digest (recorded as
        answered by the caller); the parked run resumes."""
        approve = decision == "approve"
        return await answered(
            "answer_approval", Decision(approval_id, approve, "", note, arguments, digest)
        )

    @server.tool()
    async def answer_question(
        approval_id: str,
        answer: Annotated[
            str, Field(description="The answer: one of the question's options when it has any.")
        ],
        digest: Annotated[
            str, Field(description="The question's digest, as list_approvals gives it.")
        ],
    ) -> dict[str, Any]:
        """Answer a question an agent asked (a pending approval of kind question); the parked
        run resumes with the answer as its tool's result."""
        return await answered(
            "answer_question", Decision(approval_id, True, "", digest=digest, answer=answer)
        )

    async def answered(tool: str, decision: Decision) -> dict[str, Any]:
        """``decision`` recorded as answered by the caller, if it may answer with ``tool``."""
        with refused_as(ToolError):
            principal = allowed(tool, await service.approval_agent(decision.approval_id))
            decision = msgspec.structs.replace(decision, by=answerer(principal))
            recorded = await service.answer_approval(decision, principal)
        return msgspec.to_builtins(recorded)  # type: ignore[no-any-return]

    def memory(agent_id: str, query: str | None, k: int) -> MemoryReading:
        service.served(agent_id)
        view = service.view(MemoryView)
        return memory_of(ledger(), view, service.config, agent_id, query, k)

    @server.tool()
    async def recall_memories(
        agent_id: str,
        query: str,
        k: Annotated[int, Field(ge=MIN_LIMIT, le=MAX_LIMIT, description="How many.")] = 5,
    ) -> dict[str, Any]:
        """An agent's memories ranked by relevance to query (similarity weighted by age), as
        the agent's recall tool ranks them."""
        with refused_as(ToolError):
            allowed("recall_memories", agent_id)
            reading = await asyncio.to_thread(memory, agent_id, query, k)
        assert reading.recall is not None
        return {
            "agent_id": agent_id,
            "query": query,
            "memories": msgspec.to_builtins([m.__dict__ for m in reading.recall.memories]),
            "warning": reading.recall.warning or reading.behind,
        }

    _add_resources(server, memory, timeline)
    return server


def _add_resources(
    server: MCPServer[Any],
    memory: Callable[[str, str | None, int], MemoryReading],
    timeline: Callable[[str, int | None, str | None], dict[str, Any]],
) -> None:
    """An agent's MEMORY.md and a run's timeline as resources."""

    @server.resource(
        "owlclaw://agents/{agent_id}/memory", name="MEMORY.md", mime_type="text/markdown"
    )
    async def memory_md(agent_id: str) -> str:
        """The agent's MEMORY.md, brought up to date with its memories."""
        allowed("memory_md", agent_id, ResourceError)
        with refused_as(ResourceNotFoundError):
            reading = await asyncio.to_thread(memory, agent_id, None, MIN_LIMIT)
        return await asyncio.to_thread(reading.memory_md.read_text, encoding="utf-8")

    @server.resource(
        "owlclaw://agents/{agent_id}/runs/{run_no}/timeline",
        name="run timeline",
        mime_type="text/plain",
    )
    async def timeline_resource(agent_id: str, run_no: int) -> str:
        """A run's status and its steps, one line each."""
        allowed("timeline_resource", agent_id, ResourceError)
        with refused_as(ResourceNotFoundError):
            found = await asyncio.to_thread(timeline, agent_id, run_no, None)
        return timeline_text(found)
