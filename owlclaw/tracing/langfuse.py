"""Traces of runs in Langfuse, made with the Langfuse client's own observations.

Why the client's API and not plain OpenTelemetry spans: the Langfuse SDK (v3 and later) exports
through ``LangfuseSpanProcessor``, whose default filter (``langfuse.span_filter``) passes only
spans of its own tracer, spans with ``gen_ai.*`` attributes and known LLM instrumentation
scopes; spans of an "owlclaw" tracer never leave the process, whatever ``langfuse.*``
attributes they carry. Observations made with ``Langfuse.start_as_current_observation`` are
the SDK's own spans: typed (agent, generation, tool), serialized the way its server reads them,
and exported.

One run is one trace, whose id is the run id's hex (``trace_id_of``; a resumed run adds a root
to the same trace; a caller's ``traceparent`` is left to the OTLP backend). Its root is an
``agent`` observation; each model call is a ``generation`` (model, input messages, output,
usage, cost; its duration is the latency), each executed tool call a ``tool`` observation
(arguments, result or error, level ERROR on error). The trace name (the agent id), session (the
agent id), tags and metadata (agent id, run id, trigger) are propagated to every observation of
the run.

Off (no LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY): langfuse is not imported and no client
is made.

Export never holds up a run: the SDK exports in OpenTelemetry's batch processor thread, and a
run's end only asks a thread of this module to flush (``Langfuse.flush`` blocks until sent).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from owlclaw.tracing.base import Answered, FlushSoon, RunStart

if TYPE_CHECKING:
    from langfuse import Langfuse, LangfuseAgent, LangfuseGeneration, LangfuseTool

_tracer: LangfuseTracer | None = None
_flusher = FlushSoon("langfuse-flush")


def enable() -> LangfuseTracer | None:
    """The Langfuse backend when LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set
    (LANGFUSE_HOST or LANGFUSE_BASE_URL says where; the SDK keeps one client per public key);
    None without them."""
    global _tracer  # noqa: PLW0603 - the process's client, as the SDK's per key
    public_key = os.environ.get("LANGFUSE_PUBLIC_KEY")
    if not (public_key and os.environ.get("LANGFUSE_SECRET_KEY")):
        _tracer = None
    elif _tracer is None or _tracer.public_key != public_key:
        from langfuse import Langfuse

        _tracer = LangfuseTracer(Langfuse(), public_key)
    return _tracer


def trace_id_of(run_id: UUID) -> str:
    """The Langfuse trace id of a run: its 32 hex digits (the form the SDK's trace ids take)."""
    return run_id.hex


def trace_url(run_id: UUID) -> str | None:
    """Where Langfuse shows the run's trace (``<host>/project/<id>/traces/<trace id>``), or
    None when tracing to Langfuse is off or the project is unknown. The first call asks
    Langfuse for the project id (a blocking HTTP request; the SDK keeps the answer)."""
    if _tracer is None:
        return None
    try:
        return _tracer.client.get_trace_url(trace_id=trace_id_of(run_id))
    except Exception:
        return None


class LangfuseTracer:
    """The ``Tracer`` of one Langfuse client."""

    def __init__(self, client: Langfuse, public_key: str):
        self.client = client
        self.public_key = public_key

    @contextmanager
    def run_trace(self, start: RunStart) -> Iterator[LangfuseAgent]:
        """The root observation of a run; a flush is asked at its end, however it ends."""
        from langfuse import propagate_attributes

        agent_id, trigger = start.agent_id, start.trigger
        try:
            with (
                self.client.start_as_current_observation(
                    trace_context={"trace_id": trace_id_of(start.run_id)},
                    name="agent_run",
                    as_type="agent",
                    input={
                        "trigger": trigger,
                        "focus": start.focus,
                        "payload": dict(start.payload),
                    },
                ) as root,
                propagate_attributes(
                    trace_name=agent_id,
                    session_id=agent_id,
                    tags=[f"agent:{agent_id}", f"trigger:{trigger}"],
                    metadata={
                        "agent_id": agent_id,
                        "run_id": str(start.run_id),
                        "trigger": trigger,
                    },
                ),
            ):
                yield root
        finally:
            _flusher.ask(self.client.flush)

    def run_ended(self, root: LangfuseAgent, status: str, events: Sequence[Any]) -> None:
        """The run's status, and its last event (how it ended, or where it parked) as output;
        level ERROR for a failed or timed-out run."""
        root.update(
            output={
                "status": status,
                "last_event": msgspec.to_builtins(events[-1]) if events else None,
            },
            level="ERROR" if status in ("failed", "timedout") else None,
            status_message=status,
        )

    def generation(
        self, model: str, messages: list[dict[str, Any]]
    ) -> AbstractContextManager[LangfuseGeneration]:
        return self.client.start_as_current_observation(
            name="llm", as_type="generation", model=model, input=messages
        )

    def answered(self, generation: LangfuseGeneration, answer: Answered) -> None:
        usage = answer.usage
        generation.update(
            output=answer.message,
            usage_details={
                "input": usage.get("prompt_tokens", 0),
                "output": usage.get("completion_tokens", 0),
                "total": usage.get("total_tokens", 0),
            },
            cost_details={"total": answer.cost_usd},
        )

    def failed(
        self, observation: LangfuseGeneration | LangfuseTool, error: str, error_type: str
    ) -> None:
        observation.update(level="ERROR", status_message=error)

    def tool_call(
        self, name: str, call_id: str, params: Any
    ) -> AbstractContextManager[LangfuseTool]:
        """One executed tool call of the run, its parameters as input."""
        return self.client.start_as_current_observation(
            name=name,
            as_type="tool",
            input=msgspec.to_builtins(params),
            metadata={"call_id": call_id},
        )

    def tool_settled(self, tool: LangfuseTool, told: str, error_code: str | None) -> None:
        """What the model is told of the call; an error code marks it failed."""
        tool.update(output=told)
        if error_code is not None:
            self.failed(tool, error_code, error_code)

    def flush(self) -> None:
        self.client.flush()
