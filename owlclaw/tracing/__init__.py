"""Traces of runs, to each enabled backend: Langfuse (``langfuse``: LANGFUSE_PUBLIC_KEY and
LANGFUSE_SECRET_KEY) and any OTLP endpoint in the OpenTelemetry GenAI conventions (``otel``:
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Both implement
``base.Tracer``; the functions here are what the runtime calls, and fan out to the backends
that were enabled (``enable``).

Every text handed to a backend (the run's focus and payload, the model's messages and answers,
tool arguments and what the model is told, errors, the end event) goes through the secrets'
redactor first (``redact``; ``events.redaction``), as the ledger's events do.

A traced step's context manager yields the handles of its spans, one per backend (``Traced``),
which the step's other calls take back. With no backend on, no backend is imported, and every
context manager here is one shared ``nullcontext`` yielding None.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import Any
from uuid import UUID

from events.redaction import KnownSecrets
from owlclaw.tracing import langfuse, otel
from owlclaw.tracing.base import Answered, RunStart, Tracer
from owlclaw.tracing.langfuse import trace_id_of, trace_url

__all__ = [
    "TRACEPARENT",
    "Traced",
    "answered",
    "enable",
    "enable_langfuse",
    "failed",
    "flush",
    "generation",
    "redact",
    "run_ended",
    "run_trace",
    "tool_call",
    "tool_settled",
    "trace_id_of",
    "trace_url",
]

TRACEPARENT = "traceparent"
"""The key of a caller's W3C traceparent in a run's context (RunQueued, RunStarted)."""

Traced = tuple[tuple[Tracer, Any], ...]
"""The spans of one traced step: each backend with its handle."""

_OFF: AbstractContextManager[None] = nullcontext()
_known = KnownSecrets()


def redact(secrets: Mapping[str, str]) -> None:
    """Replace these secrets' values (name -> value) too, with ``[redacted:NAME]``, in what
    is traced from now on, by every backend."""
    _known.add(secrets)


def enable() -> bool:
    """Switch each backend on or off as the environment says; whether any is on."""
    return bool(langfuse.enable()) | bool(otel.enable())


def enable_langfuse() -> bool:
    """Switch tracing to Langfuse on or off as its keys say; whether it is on."""
    return langfuse.enable() is not None


def _tracers() -> tuple[Tracer, ...]:
    return tuple(t for t in (langfuse._tracer, otel._tracer) if t is not None)


def run_trace(
    run_id: UUID,
    agent_id: str,
    trigger: str,
    focus: str | None,
    payload: Mapping[str, Any],
    traceparent: str | None = None,
) -> AbstractContextManager[Traced | None]:
    """The root spans of a run (a child of the caller's span, with ``traceparent``, where the
    backend continues callers' traces); each backend flushes soon after it ends."""
    if not (tracers := _tracers()):
        return _OFF
    focus, payload = _known.redactor.value(focus), _known.redactor.value(payload)
    start = RunStart(run_id, agent_id, trigger, focus, payload, traceparent)
    return _each([(t, t.run_trace(start)) for t in tracers])


def run_ended(traced: Traced | None, status: str, events: Sequence[Any]) -> None:
    """The run's status and how it ended (its last event)."""
    events = [_known.redactor.event(e) for e in events[-1:]]
    for tracer, root in traced or ():
        tracer.run_ended(root, status, events)


def generation(model: str, messages: list[dict[str, Any]]) -> AbstractContextManager[Traced | None]:
    """One model call of the run."""
    if not (tracers := _tracers()):
        return _OFF
    messages = _known.redactor.value(messages)
    return _each([(t, t.generation(model, messages)) for t in tracers])


def answered(
    traced: Traced | None,
    message: dict[str, Any],
    usage: dict[str, int],
    cost_usd: float,
    finish_reason: str | None = None,
    response_model: str | None = None,
) -> None:
    answer = Answered(
        _known.redactor.value(message), usage, cost_usd, finish_reason, response_model
    )
    for tracer, gen in traced or ():
        tracer.answered(gen, answer)


def failed(traced: Traced | None, error: str, error_type: str) -> None:
    """The model call failed: ``error`` says how, ``error_type`` is the exception's type."""
    error = _known.redactor.text(error)
    for tracer, observation in traced or ():
        tracer.failed(observation, error, error_type)


def tool_call(name: str, call_id: str, params: Any) -> AbstractContextManager[Traced | None]:
    """One executed tool call of the run."""
    if not (tracers := _tracers()):
        return _OFF
    params = _known.redactor.value(params)
    return _each([(t, t.tool_call(name, call_id, params)) for t in tracers])


def tool_settled(traced: Traced | None, told: str, error_code: str | None) -> None:
    """What the model is told of the call; an error code marks it failed."""
    told = _known.redactor.json_text(told)
    for tracer, tool in traced or ():
        tracer.tool_settled(tool, told, error_code)


def flush() -> None:
    """Send what is traced so far, and wait for it (for shutdown and tests)."""
    for tracer in _tracers():
        tracer.flush()


@contextmanager
def _each(opened: list[tuple[Tracer, AbstractContextManager[Any]]]) -> Iterator[Traced]:
    with ExitStack() as stack:
        yield tuple((tracer, stack.enter_context(cm)) for tracer, cm in opened)
