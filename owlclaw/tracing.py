"""Tracing through OpenTelemetry with Langfuse's attribute conventions.

One trace per run (its trace id is the run id, so a ledger run and its trace share an id), a
``generation`` observation per LLM call with model, usage and cost, a span per tool call. With
no tracer provider configured this is OpenTelemetry's no-op; ``enable_langfuse()`` installs the
Langfuse v5 client (OTel based) when its keys are in the environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags

TRACER = "owlclaw"
OBSERVATION_TYPE = "langfuse.observation.type"


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


@contextmanager
def run_trace(run_id: UUID, agent_id: str, trigger: str, focus: str | None) -> Iterator[Span]:
    """The root span of a run, in the trace whose id is the run id."""
    parent = SpanContext(
        trace_id=run_id.int,
        span_id=(run_id.int & ((1 << 64) - 1)) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    context = trace.set_span_in_context(NonRecordingSpan(parent))
    attributes = {
        "langfuse.trace.name": f"agent_run {agent_id}",
        "session.id": agent_id,
        "owlclaw.run_id": str(run_id),
        "owlclaw.trigger": trigger,
        OBSERVATION_TYPE: "agent",
    }
    if focus:
        attributes["owlclaw.focus"] = focus
    with _tracer().start_as_current_span(
        "agent_run", context=context, attributes=attributes
    ) as span:
        yield span
    _flush()


@contextmanager
def generation(model: str) -> Iterator[Span]:
    with _tracer().start_as_current_span(
        "llm", attributes={OBSERVATION_TYPE: "generation", "langfuse.observation.model.name": model}
    ) as span:
        yield span


def record_generation(span: Span, usage: dict[str, int], cost_usd: float, model: str) -> None:
    span.set_attribute("langfuse.observation.model.name", model)
    span.set_attribute(
        "langfuse.observation.usage_details",
        json.dumps(
            {
                "input": usage.get("prompt_tokens", 0),
                "output": usage.get("completion_tokens", 0),
                "total": usage.get("total_tokens", 0),
            }
        ),
    )
    span.set_attribute("langfuse.observation.cost_details", json.dumps({"total": cost_usd}))


@contextmanager
def tool_span(name: str, call_id: str) -> Iterator[Span]:
    with _tracer().start_as_current_span(
        f"tool {name}", attributes={OBSERVATION_TYPE: "tool", "owlclaw.call_id": call_id}
    ) as span:
        yield span


def _flush() -> None:
    provider: Any = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush()


_langfuse: Any = None


def enable_langfuse() -> bool:
    """Send traces to Langfuse when LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set
    (once per process; the client installs its OpenTelemetry exporter)."""
    global _langfuse  # noqa: PLW0603 - one Langfuse client per process
    if not (os.environ.get("LANGFUSE_PUBLIC_KEY") and os.environ.get("LANGFUSE_SECRET_KEY")):
        return False
    if _langfuse is None:
        from langfuse import Langfuse

        _langfuse = Langfuse()
    return True
