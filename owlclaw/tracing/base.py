"""What a tracing backend does with a run (``Tracer``), and the background flush both backends
use so that a run's end never waits for its spans to be sent."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID


@dataclass(frozen=True)
class RunStart:
    """What a run's root span is made of. ``traceparent``: the W3C header of the caller whose
    trace the run continues (recorded with the run, so that its resumption continues it too)."""

    run_id: UUID
    agent_id: str
    trigger: str
    focus: str | None
    payload: Mapping[str, Any]
    traceparent: str | None = None


@dataclass(frozen=True)
class Answered:
    """One model's answer, as a trace shows it."""

    message: dict[str, Any]
    usage: dict[str, int]
    cost_usd: float
    finish_reason: str | None = None
    response_model: str | None = None


class Tracer(Protocol):
    """One tracing backend. Each context manager yields the backend's handle of the span it
    opened; the other methods take that handle back. A backend's spans nest by its own
    context: the spans opened inside ``run_trace`` are children of its root."""

    def run_trace(self, start: RunStart) -> AbstractContextManager[Any]: ...

    def run_ended(self, root: Any, status: str, events: Sequence[Any]) -> None: ...

    def generation(self, model: str, messages: list[dict[str, Any]]) -> AbstractContextManager[Any]:
        """One model call."""
        ...

    def answered(self, generation: Any, answer: Answered) -> None: ...

    def failed(self, observation: Any, error: str, error_type: str) -> None:
        """A model call (or tool call) failed: ``error`` says how, ``error_type`` is its
        low-cardinality class (an exception's type, a tool's error code)."""
        ...

    def tool_call(self, name: str, call_id: str, params: Any) -> AbstractContextManager[Any]: ...

    def tool_settled(self, tool: Any, told: str, error_code: str | None) -> None: ...

    def flush(self) -> None:
        """Send what is traced so far, and wait for it."""
        ...


class FlushSoon:
    """A flush asked of a thread of its own (a backend's flush blocks until sent), at most one
    queued at a time: a flush not yet started will send the spans ended since it was asked."""

    def __init__(self, name: str):
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._queued: Future[Any] | None = None

    def ask(self, flush: Callable[[], object]) -> None:
        queued = self._queued
        if queued is not None and not queued.running() and not queued.done():
            return
        self._queued = self._thread.submit(flush)
