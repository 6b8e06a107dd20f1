"""Traces of runs in Langfuse, made with the Langfuse client's own observations.

Why the client's API and not plain OpenTelemetry spans: the Langfuse SDK (v3 and later) exports
through ``LangfuseSpanProcessor``, whose default filter (``langfuse.span_filter``) passes only
spans of its own tracer, spans with ``gen_ai.*`` attributes and known LLM instrumentation
scopes; spans of an "owlclaw" tracer never leave the process, whatever ``langfuse.*``
attributes they carry. Observations made with ``Langfuse.start_as_current_observation`` are
the SDK's own spans: typed (agent, generation, tool), serialized the way its server reads them,
and exported.

One run is one trace, whose id is the run id's hex (``trace_id_of``; a resumed run adds a root
to the same trace). Its root is an ``agent`` observation; each model call is a ``generation``
(model, input messages, output, usage, cost; its duration is the latency), each executed tool
call a ``tool`` observation (arguments, result or error, level ERROR on error). The trace name
(the agent id), session (the agent id), tags and metadata (agent id, run id, trigger) are
propagated to every observation of the run.

Off (no LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY): langfuse is not imported, no client is
made, and every context manager here is one shared ``nullcontext`` yielding None.

Export never holds up a run: the SDK exports in OpenTelemetry's batch processor thread, and a
run's end only asks a thread of this module to flush (``Langfuse.flush`` blocks until sent).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

if TYPE_CHECKING:
    from langfuse import Langfuse, LangfuseAgent, LangfuseGeneration, LangfuseTool

_OFF: AbstractContextManager[None] = nullcontext()
_client: Langfuse | None = None
_client_key: str | None = None
_flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="langfuse-flush")
_queued_flush: Future[None] | None = None


def enable_langfuse() -> bool:
    """Trace to Langfuse when LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set (LANGFUSE_HOST
    or LANGFUSE_BASE_URL says where; the SDK keeps one client per public key); without them,
    tracing is off."""
    global _client, _client_key  # noqa: PLW0603 - the process's client, as the SDK's per key
    public_key = os.environ.get("LANGFUSE_PUBLIC_KEY")
    if not (public_key and os.environ.get("LANGFUSE_SECRET_KEY")):
        _client = _client_key = None
        return False
    if _client_key != public_key:
        from langfuse import Langfuse

        _client, _client_key = Langfuse(), public_key
    return True


def trace_id_of(run_id: UUID) -> str:
    """The Langfuse trace id of a run: its 32 hex digits (the form the SDK's trace ids take)."""
    return run_id.hex


def trace_url(run_id: UUID) -> str | None:
    """Where Langfuse shows the run's trace (``<host>/project/<id>/traces/<trace id>``), or
    None when tracing is off or the project is unknown. The first call asks Langfuse for the
    project id (a blocking HTTP request; the SDK keeps the answer)."""
    if _client is None:
        return None
    try:
        return _client.get_trace_url(trace_id=trace_id_of(run_id))
    except Exception:
        return None


def run_trace(
    run_id: UUID,
    agent_id: str,
    trigger: str,
    focus: str | None,
    payload: Mapping[str, Any],
) -> AbstractContextManager[LangfuseAgent | None]:
    """The root observation of a run (None when tracing is off); a flush is asked at its end,
    however it ends."""
    if _client is None:
        return _OFF
    return _run_trace(_client, run_id, agent_id, trigger, focus, payload)


@contextmanager
def _run_trace(
    client: Langfuse,
    run_id: UUID,
    agent_id: str,
    trigger: str,
    focus: str | None,
    payload: Mapping[str, Any],
) -> Iterator[LangfuseAgent]:
    from langfuse import propagate_attributes

    try:
        with (
            client.start_as_current_observation(
                trace_context={"trace_id": trace_id_of(run_id)},
                name="agent_run",
                as_type="agent",
                input={"trigger": trigger, "focus": focus, "payload": dict(payload)},
            ) as root,
            propagate_attributes(
                trace_name=agent_id,
                session_id=agent_id,
                tags=[f"agent:{agent_id}", f"trigger:{trigger}"],
                metadata={"agent_id": agent_id, "run_id": str(run_id), "trigger": trigger},
            ),
        ):
            yield root
    finally:
        _flush_soon(client)


def run_ended(root: LangfuseAgent | None, status: str, events: Sequence[Any]) -> None:
    """The run's status, and its last event (how it ended, or where it parked) as output;
    level ERROR for a failed or timed-out run."""
    if root is not None:
        root.update(
            output={
                "status": status,
                "last_event": msgspec.to_builtins(events[-1]) if events else None,
            },
            level="ERROR" if status in ("failed", "timedout") else None,
            status_message=status,
        )


def generation(
    model: str, messages: list[dict[str, Any]]
) -> AbstractContextManager[LangfuseGeneration | None]:
    """One model call of the run (None when tracing is off)."""
    if _client is None:
        return _OFF
    return _client.start_as_current_observation(
        name="llm", as_type="generation", model=model, input=messages
    )


def answered(
    gen: LangfuseGeneration | None,
    message: dict[str, Any],
    usage: dict[str, int],
    cost_usd: float,
) -> None:
    if gen is not None:
        gen.update(
            output=message,
            usage_details={
                "input": usage.get("prompt_tokens", 0),
                "output": usage.get("completion_tokens", 0),
                "total": usage.get("total_tokens", 0),
            },
            cost_details={"total": cost_usd},
        )


def failed(observation: LangfuseGeneration | LangfuseTool | None, error: str) -> None:
    if observation is not None:
        observation.update(level="ERROR", status_message=error)


def tool_call(name: str, call_id: str, params: Any) -> AbstractContextManager[LangfuseTool | None]:
    """One executed tool call of the run, its parameters as input (None when tracing is off)."""
    if _client is None:
        return _OFF
    return _client.start_as_current_observation(
        name=name,
        as_type="tool",
        input=msgspec.to_builtins(params),
        metadata={"call_id": call_id},
    )


def tool_settled(tool: LangfuseTool | None, told: str, error_code: str | None) -> None:
    """What the model is told of the call; an error code marks it failed."""
    if tool is not None:
        tool.update(output=told)
        if error_code is not None:
            failed(tool, error_code)


def flush() -> None:
    """Send what is traced so far, and wait for it (for shutdown and tests)."""
    if _client is not None:
        _client.flush()


def _flush_soon(client: Langfuse) -> None:
    """Ask the flush thread to send the spans ended so far, unless a flush not yet started
    is already queued (it will send them)."""
    global _queued_flush  # noqa: PLW0603 - one queued flush at a time
    queued = _queued_flush
    if queued is not None and not queued.running() and not queued.done():
        return
    _queued_flush = _flusher.submit(client.flush)
