"""A live call: the tool runs with its time limit, idempotent tools are retried, its errors
are classified and its outcome is shaped for the record.

Its own module because this is what "execute" means for a live run only (``Execution``); the
pipeline in ``owlclaw.tools.executor`` is the same for a replay, which serves recorded outcomes.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import Any

import msgspec
from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_exponential_jitter

from events import catalog as ev
from events.agent import Agent
from events.agent_state import Approval
from events.run import Run
from owlclaw.tools.encoding import REJECTED_TEXT_CHARS, encode_told, json_safe, printable, truncate
from owlclaw.tools.errors import Parked, ToolError
from owlclaw.tools.executor import Settled, ToolLimits
from owlclaw.tools.tool import Tool, ToolContext

TRACEBACK_CHARS = 4000
RETRY_INITIAL_S, RETRY_MAX_S = 0.05, 2.0


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


def reraise_cancellation(error: BaseException) -> None:
    """Client libraries (litellm among them) may turn a cancellation into their own error;
    when our task is being cancelled (the run timed out), it must stay a cancellation."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from error
