"""The tool pipeline: every call the model makes goes through these stages, in this order.

repair (almost-JSON, ``owlclaw.tools.repair``) → parse → govern → approve → rate-limit →
(write-ahead ToolCallRequested) → execute with a timeout → classify errors → retry idempotent
tools → make the result JSON-safe → truncate → record.

``admit`` takes a call up to its recorded request; the run commits the requests of one model
response together (write-ahead) and then ``execute``s them, side by side where they may
(``owlclaw.runtime.batch``).

A call that needs a person's approval parks its run (``Parked``) until the answer is recorded;
the run then resumes from its recorded steps and this call comes through again, answered.

Refusals (rejected, denied, rate-limited) are recorded without a ToolCallRequested and still
count toward the run's call limit (the Run aggregate counts them). What "execute" means is the
run's ``Execution``: a live run calls the tool (``owlclaw.tools.live``), a replay serves the
recorded outcome. What the model and the ledger are given of a result is
``owlclaw.tools.encoding``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from events import catalog as ev
from events.agent import Agent
from events.agent_state import Approval
from events.argument_digest import arguments_digest
from events.run import Run
from events.streams import approval_id_for
from owlclaw import tracing
from owlclaw.tools.encoding import REJECTED_TEXT_CHARS, encode_told, printable
from owlclaw.tools.errors import Parked, ToolError, unknown_tool
from owlclaw.tools.repair import repair_arguments
from owlclaw.tools.tool import RunScope, Tool, ToolContext, idempotency_key

log = logging.getLogger("owlclaw.tools")

QUESTION = "the agent asks a person"
"""The reason an ask_human call waits (ApprovalRequested ``reason``)."""

if TYPE_CHECKING:
    from owlclaw.tools.governance import Governance


class Admits(Protocol):
    """A rate limiter: None admits (and counts) the call, a text says why it may not run."""

    def admit(self, tool: str, now: float) -> str | None: ...


@dataclass(frozen=True)
class ToolLimits:
    timeout_s: float = 30.0
    """A call's time limit when its tool sets none."""
    result_bytes: int = 16 * 1024
    """The result the model sees is cut above this, when its tool sets no limit."""
    ledger_bytes: int = 1024 * 1024
    """The ledger keeps the whole result up to this; above, its JSON text cut."""
    retries: int = 2
    """Retries of an idempotent tool after a retryable system error."""


@dataclass(frozen=True)
class Settled:
    """A call's outcome as recorded: the event, its fields, and what the model is told."""

    event: type[ev.LedgerEvent]
    fields: dict[str, Any]
    told: str
    error_code: str | None = None
    """Set when the call failed, whatever the way (refused, raised, timed out)."""


class Execution(Protocol):
    """What executing a call means for this run (a live call, or the recorded outcome)."""

    async def settle(
        self, tool: Tool | None, params: Any, ctx: ToolContext, limits: ToolLimits
    ) -> Settled: ...

    def recorded_arguments(self, call_id: str) -> dict[str, Any] | None:
        """A replay's arguments for a tool this process does not load."""
        ...

    def approval(self, agent: Agent, run: Run, call_id: str) -> Approval | None:
        """The answer (or pending request) for a call that needs approval, if it was asked."""
        ...


@dataclass
class CallSite:
    """What the pipeline needs from the run making the call."""

    tools: Mapping[str, Tool]
    hidden: Mapping[str, str]
    """Tools hidden from the model (governance, skills, the operator), with the reason."""
    rate: Admits
    limits: ToolLimits
    execution: Execution
    scope: Callable[[], RunScope]
    commit: Callable[[bool], Awaitable[None]]
    """Makes what the run recorded durable (the write-ahead of a response's requests); with
    True it may complete while the calls run: their tools' only effects are ledger events, which
    commit after them in any case."""
    agent_id: str
    governance: Governance

    @property
    def run(self) -> Run:
        return self.scope().run


@dataclass(frozen=True)
class Admitted:
    """A call through the stages before it runs: its ToolCallRequested is recorded, not yet
    committed (the run commits the requests of one model response together)."""

    tool: Tool | None
    """None: a replay's call of a tool this process does not load."""
    params: Any


def admit(site: CallSite, call_id: str, name: str, arguments: str) -> Settled | Admitted:
    """One call through the stages before it runs: its refusal, or its recorded request;
    ``Parked`` when it waits for a person's approval. Never raises for what the model sent."""
    tool = site.tools.get(name)
    repaired = repair_arguments(arguments) if tool is not None else None
    params = parse(site, tool, call_id, name, arguments if repaired is None else repaired)
    if isinstance(params, ToolError):
        return refuse(
            site.run,
            ev.ToolCallRejected,
            params,
            call_id=call_id,
            tool=name,
            error=params.error,
            arguments_text=printable(arguments)[:REJECTED_TEXT_CHARS],
        )
    if (hidden := govern(site, name)) is not None:
        told = ToolError(
            error=f"tool {name!r} is not available: {hidden}", error_code="TOOL_DENIED"
        )
        return refuse(site.run, ev.ToolCallDenied, told, call_id=call_id, tool=name, reason=hidden)
    approved = approve(site, call_id, name, params)
    if isinstance(approved, Settled):
        return approved
    params = approved
    if (limited := rate_limit(site, name)) is not None:
        told = ToolError(error=limited, error_code="RATE_LIMITED", retryable=True)
        return refuse(
            site.run,
            ev.ToolCallDenied,
            told,
            call_id=call_id,
            tool=name,
            reason=limited,
            error_code=told.error_code,
        )
    source = tool.spec.source if tool is not None else None
    site.run.record(
        ev.ToolCallRequested,
        call_id=call_id,
        tool=name,
        arguments=msgspec.to_builtins(params),
        **(source.recorded() if source is not None else {}),
        **repair_record(arguments, repaired),
    )
    return Admitted(tool, params)


async def execute(
    site: CallSite, tool: Tool | None, call_id: str, name: str, params: Any
) -> Settled:
    """Run a requested call and record its outcome on the run."""
    scope = site.scope()
    ctx = ToolContext(
        agent_id=site.agent_id,
        run_id=scope.run.id,
        call_id=call_id,
        idempotency_key=idempotency_key(scope.run.id, call_id),
        logger=log.getChild(name),
        scope=scope,
    )
    with tracing.tool_call(name, call_id, params) as traced:
        settled = await site.execution.settle(tool, params, ctx, site.limits)
        tracing.tool_settled(traced, settled.told, settled.error_code)
    scope.run.record(settled.event, call_id=call_id, tool=name, **settled.fields)
    return settled


def parse(
    site: CallSite, tool: Tool | None, call_id: str, name: str, arguments: str
) -> Any | ToolError:
    """The typed parameters, or why the arguments (or the tool name) are not acceptable."""
    if tool is not None:
        return tool.spec.parse(arguments)
    if (recorded := site.execution.recorded_arguments(call_id)) is not None:
        return recorded
    return unknown_tool(printable(name)[:200], list(site.tools))


def repair_record(arguments: str, repaired: str | None) -> dict[str, str]:
    """ToolCallRequested's record of a repair: the model's text and what it was repaired into."""
    return {} if repaired is None else {"raw_arguments": arguments, "repaired_arguments": repaired}


def govern(site: CallSite, name: str) -> str | None:
    """Why the tool is hidden from this run (governance, skills, hours, the operator)."""
    return site.hidden.get(name)


def approve(site: CallSite, call_id: str, name: str, params: Any) -> Any:
    """The parameters to execute with (an approver may have edited them), a refusal when the
    approval was denied or expired, or ``Parked`` when the call waits for an answer (asked now:
    ApprovalRequested on the agent, RunParked on the run). A question (ask_human) always
    waits; answered or expired, it executes, and the tool reads what became of it."""
    arguments = msgspec.to_builtins(params)
    tool = site.tools.get(name)
    question = tool is not None and tool.spec.question
    declared = tool.spec.ask_if if tool is not None else None
    reason = QUESTION if question else site.governance.approval_reason(name, arguments, declared)
    if reason is None:
        return params
    scope = site.scope()
    approval = site.execution.approval(scope.agent, scope.run, call_id)
    if approval is None:
        approval_id = scope.agent.request_approval(
            scope.run.id,
            call_id,
            name,
            arguments,
            reason,
            site.governance.approvers,
            site.governance.approval_timeout_s,
            1 if question else site.governance.approvals_needed(name),
            kind="question" if question else "call",
        )
        scope.run.record(ev.RunParked, approval_id=approval_id, call_id=call_id)
        raise Parked(approval_id)
    if approval.status == "pending":
        scope.run.record(
            ev.RunParked, approval_id=approval_id_for(scope.run.id, call_id), call_id=call_id
        )
        raise Parked(approval_id_for(scope.run.id, call_id))
    if approval.kind == "question" and approval.status == "expired":
        return params  # the tool tells the model nobody answered
    if approval.status == "granted":
        told = unbound_grant(scope.run, call_id, approval, arguments)
        if told is None:
            if approval.edited_arguments is None or tool is None:  # a replay's unknown tool
                return params
            edited = tool.spec.parse(approval.edited_arguments)
            if isinstance(edited, ToolError):  # the tool's schema changed since the answer
                return refuse(
                    scope.run,
                    ev.ToolCallRejected,
                    edited,
                    call_id=call_id,
                    tool=name,
                    error=edited.error,
                    arguments_text=printable(str(approval.edited_arguments)),
                )
            return edited
    elif approval.status == "denied":
        told = ToolError(
            error=f"denied by {approval.by}" + (f": {approval.note}" if approval.note else ""),
            error_code="APPROVAL_DENIED",
        )
    else:
        told = ToolError(
            error=f"nobody approved the call before {approval.expires_at.isoformat()}",
            error_code="APPROVAL_EXPIRED",
        )
    return refuse(
        scope.run,
        ev.ToolCallDenied,
        told,
        call_id=call_id,
        tool=name,
        reason=told.error,
        error_code=told.error_code,
    )


def unbound_grant(
    run: Run, call_id: str, approval: Approval, arguments: dict[str, Any]
) -> ToolError | None:
    """Why a grant does not cover this call: it was used already (a grant executes one call;
    a model repeating a call id gets no second run of it), or the call's arguments are not
    those the approval showed."""
    if call_id in run.state.requested:
        return ToolError(
            error=f"the approval of call {call_id} was used by its one execution already",
            error_code="APPROVAL_USED",
        )
    if arguments_digest(arguments) != (approval.digest or arguments_digest(approval.arguments)):
        return ToolError(
            error=f"call {call_id} has other arguments than its approval showed",
            error_code="APPROVAL_MISMATCH",
        )
    return None


def rate_limit(site: CallSite, name: str) -> str | None:
    """Why the call exceeds the tool's rate limit (an admitted call is counted). Wall-clock
    time: windows are loaded from the ledger's timestamps (owlclaw.tools.rate_limits)."""
    return site.rate.admit(name, time.time())


def refuse(run: Run, event: type[ev.LedgerEvent], told: ToolError, **fields: Any) -> Settled:
    run.record(event, **fields)
    return Settled(event, fields, encode_told(told), told.error_code)
