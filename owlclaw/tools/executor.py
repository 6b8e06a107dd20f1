"""The tool pipeline: every call the model makes goes through these stages, in this order.

parse → govern → approve → rate-limit → (write-ahead ToolCallRequested) → execute with a
timeout → classify errors → retry idempotent tools → make the result JSON-safe → truncate →
record.

A call that needs a person's approval parks its run (``Parked``) until the answer is recorded;
the run then resumes from its recorded steps and this call comes through again, answered.

Refusals (rejected, denied, rate-limited) are recorded without a ToolCallRequested and still
count toward the run's call limit (the Run aggregate counts them). What "execute" means is the
run's ``Execution``: a live run calls the tool, a replay serves the recorded outcome.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_exponential_jitter

from events import catalog as ev
from events.agent import Agent
from events.agent_state import Approval
from events.run import Run
from events.streams import approval_id_for
from owlclaw import tracing
from owlclaw.tools.errors import Parked, ToolError, unknown_tool
from owlclaw.tools.tool import RunScope, Tool, ToolContext, idempotency_key

TRACEBACK_CHARS = 4000
REJECTED_TEXT_CHARS = 2000
RETRY_INITIAL_S, RETRY_MAX_S = 0.05, 2.0
log = logging.getLogger("owlclaw.tools")

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
    """Makes what the run recorded durable (the write-ahead of a request); with True it may
    complete while the call runs (see ``call_tool``)."""
    agent_id: str
    governance: Governance

    @property
    def run(self) -> Run:
        return self.scope().run


async def call_tool(site: CallSite, call_id: str, name: str, arguments: str) -> Settled:
    """One call through the whole pipeline; never raises for anything the model sent."""
    tool = site.tools.get(name)
    params = parse(site, tool, call_id, name, arguments)
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
    site.run.record(
        ev.ToolCallRequested, call_id=call_id, tool=name, arguments=msgspec.to_builtins(params)
    )
    # Write-ahead: the request is durable before the tool acts. A tool whose only effect is
    # ledger events runs while the request commits: its events commit after it in any case.
    await site.commit(tool is not None and tool.spec.effect_in_ledger)
    return await execute(site, tool, call_id, name, params)


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


def govern(site: CallSite, name: str) -> str | None:
    """Why the tool is hidden from this run (governance, skills, hours, the operator)."""
    return site.hidden.get(name)


def approve(site: CallSite, call_id: str, name: str, params: Any) -> Any:
    """The parameters to execute with (an approver may have edited them), a refusal when the
    approval was denied or expired, or ``Parked`` when the call waits for an answer (asked now:
    ApprovalRequested on the agent, RunParked on the run)."""
    arguments = msgspec.to_builtins(params)
    tool = site.tools.get(name)
    declared = tool.spec.ask_if if tool is not None else None
    reason = site.governance.approval_reason(name, arguments, declared)
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
        )
        scope.run.record(ev.RunParked, approval_id=approval_id, call_id=call_id)
        raise Parked(approval_id)
    if approval.status == "pending":
        scope.run.record(
            ev.RunParked, approval_id=approval_id_for(scope.run.id, call_id), call_id=call_id
        )
        raise Parked(approval_id_for(scope.run.id, call_id))
    if approval.status == "granted":
        if approval.edited_arguments is None or tool is None:  # None: a replay's unknown tool
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
    if approval.status == "denied":
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


def rate_limit(site: CallSite, name: str) -> str | None:
    """Why the call exceeds the tool's rate limit (an admitted call is counted). Wall-clock
    time: windows are loaded from the ledger's timestamps (owlclaw.tools.rate_limits)."""
    return site.rate.admit(name, time.time())


def refuse(run: Run, event: type[ev.LedgerEvent], told: ToolError, **fields: Any) -> Settled:
    run.record(event, **fields)
    return Settled(event, fields, encode_told(told), told.error_code)


class LiveExecution:
    """A live run: the tool runs, with its timeout, retries and result limits."""

    async def settle(
        self, tool: Tool | None, params: Any, ctx: ToolContext, limits: ToolLimits
    ) -> Settled:
        assert tool is not None  # parse refused unknown tools
        began = time.perf_counter()
        result, trace = await with_retries(tool, params, ctx, limits)
        duration_ms = round((time.perf_counter() - began) * 1000, 3)
        if isinstance(result, ToolError):
            return failure(tool, result, trace, duration_ms, limits)
        model_bytes = tool.spec.max_result_bytes or limits.result_bytes
        return success(result, model_bytes, limits, duration_ms)

    def recorded_arguments(self, call_id: str) -> dict[str, Any] | None:
        return None

    def approval(self, agent: Agent, run: Run, call_id: str) -> Approval | None:
        return agent.approval_for(run.id, call_id)


async def with_retries(
    tool: Tool, params: Any, ctx: ToolContext, limits: ToolLimits
) -> tuple[Any, str]:
    """Idempotent tools are retried after a retryable system error, with exponential backoff
    and jitter; the result of the last attempt, and its traceback if it raised."""
    attempts = 1 + (limits.retries if tool.spec.idempotent else 0)
    if attempts == 1:
        return await run_with_timeout(tool, params, ctx, limits)
    retrying = AsyncRetrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(
            multiplier=RETRY_INITIAL_S, max=RETRY_MAX_S, jitter=RETRY_INITIAL_S
        ),
        retry=retry_if_result(
            lambda r: isinstance(r[0], ToolError) and r[0].kind == "system" and r[0].retryable
        ),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        reraise=True,
    )
    result: tuple[Any, str] = await retrying(run_with_timeout, tool, params, ctx, limits)
    return result


async def run_with_timeout(
    tool: Tool, params: Any, ctx: ToolContext, limits: ToolLimits
) -> tuple[Any, str]:
    """The tool's result, or its error classified; a traceback for system errors."""
    timeout_s = tool.spec.timeout_s or limits.timeout_s
    limit = asyncio.timeout(timeout_s)
    try:
        async with limit:
            return await tool.execute(params, ctx), ""
    except TimeoutError as e:
        if limit.expired():
            return timed_out(tool, timeout_s), ""
        return classify(tool, e), bounded_traceback(e)
    except Parked:  # the tool recorded what its run waits for (spawn_agent's sub-agent)
        raise
    except Exception as e:
        reraise_cancellation(e)
        return classify(tool, e), bounded_traceback(e)


def timed_out(tool: Tool, timeout_s: float) -> ToolError:
    return ToolError(
        error=f"{tool.spec.name} did not finish within {timeout_s:g} s",
        error_code="TIMEOUT",
        kind="timeout",
        retryable=tool.spec.idempotent,
    )


def classify(tool: Tool, error: Exception) -> ToolError:
    """A handler's exception is a system error: ours (or its service's), not the model's;
    worth retrying only when the tool is idempotent."""
    return ToolError(
        error=f"{type(error).__name__}: {error}"[:REJECTED_TEXT_CHARS],
        error_code="TOOL_FAILED",
        kind="system",
        retryable=tool.spec.idempotent,
    )


def bounded_traceback(error: Exception) -> str:
    text = "".join(traceback.format_exception(error))
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]


def failure(
    tool: Tool, error: ToolError, trace: str, duration_ms: float, limits: ToolLimits
) -> Settled:
    if error.error_code == "TIMEOUT":
        timeout_s = tool.spec.timeout_s or limits.timeout_s
        fields: dict[str, Any] = {"timeout_s": timeout_s, "duration_ms": duration_ms}
        return Settled(ev.ToolCallTimedOut, fields, encode_told(error), "TIMEOUT")
    fields = {
        "error": printable(error.error),
        "error_code": error.error_code,
        "retryable": error.retryable,
        "duration_ms": duration_ms,
        "traceback": trace,
    }
    return Settled(ev.ToolCallFailed, fields, encode_told(error), error.error_code)


def success(result: Any, model_bytes: int, limits: ToolLimits, duration_ms: float) -> Settled:
    """The result made JSON-safe, cut for the model and (above its cap) for the ledger."""
    encoded = json_safe(result)
    told, truncated = truncate(encoded, model_bytes)
    if len(encoded) <= limits.ledger_bytes:
        stored = msgspec.json.decode(encoded)
    else:
        stored = truncate(encoded, limits.ledger_bytes)[0]
    fields = {
        "result": stored,
        "duration_ms": duration_ms,
        "result_bytes": len(encoded),
        "truncated": truncated,
    }
    return Settled(ev.ToolCallSucceeded, fields, told)


def json_safe(value: Any) -> bytes:
    """Any result as JSON: what msgspec encodes natively (sets, datetimes, bytes, Structs,
    dataclasses…) as it encodes it; anything else (an object of the app's own class) as its
    string form; text that is not valid Unicode with its bad characters replaced."""
    try:
        return msgspec.json.encode(value, enc_hook=_repr)
    except UnicodeEncodeError:
        return msgspec.json.encode(_clean(value), enc_hook=_repr)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return msgspec.json.encode(printable(_repr(value)))


def _clean(value: Any) -> Any:
    match value:
        case str():
            return printable(value)
        case dict():
            return {printable(str(k)): _clean(v) for k, v in value.items()}
        case list() | tuple() | set() | frozenset():
            return [_clean(v) for v in value]
    return value


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as e:
        return f"<{type(value).__name__} (repr failed: {type(e).__name__})>"


def printable(text: str) -> str:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode()
    return text


def truncate(encoded: bytes, limit: int) -> tuple[str, bool]:
    """The JSON text, or its first ``limit`` bytes cut at a clean boundary (a whole character,
    and the last line break, comma or space in the final tenth when there is one) with a marker
    saying how much was cut."""
    if len(encoded) <= limit:
        return encoded.decode(), False
    head = encoded[:limit].decode(errors="ignore")
    floor = len(head) - max(1, len(head) // 10)
    clean = max(head.rfind(sep, floor) for sep in ("\n", ",", " "))
    if clean > 0:
        head = head[: clean + 1]
    cut = len(encoded) - len(head.encode())
    return f"{head}\n[truncated: {cut} of {len(encoded)} bytes cut]", True


def encode_told(error: ToolError) -> str:
    return msgspec.json.encode(error).decode()


def canonical_arguments(arguments: str) -> str:
    """The arguments parsed and key-sorted, so calls that differ only in formatting or key
    order compare equal; text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments


def reraise_cancellation(error: BaseException) -> None:
    """Client libraries (litellm among them) may turn a cancellation into their own error;
    when our task is being cancelled (the run timed out), it must stay a cancellation."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from error
