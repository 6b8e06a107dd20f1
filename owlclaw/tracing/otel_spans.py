"""Runs as OpenTelemetry spans in the GenAI semantic conventions, exported over OTLP/HTTP
(protobuf) as the standard variables configure it (endpoint, headers, OTEL_SERVICE_NAME, ...:
the SDK reads them; the service is "owlclaw" unless named).

A run is a span ``invoke_agent {agent}`` (INTERNAL: the agent runs in this process); each model
call a child ``chat {model}`` (CLIENT) with the provider, request and response model, token
usage and finish reason; each executed tool call a child ``execute_tool {tool}`` (INTERNAL)
with the tool's name and call id, and ``error.type`` (its error code) when it failed. One run is
one trace whose id is the run id's 128 bits (a resumed run adds a root to the same trace),
unless the run was started with a caller's W3C ``traceparent``: then its root is a child of the
caller's span, in the caller's trace. Message content (model input and output, tool arguments
and results) is recorded only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true,
the conventions' opt-in.

The backend has its own TracerProvider (the global one may be Langfuse's) and its own span
context (a context variable of this module, not OpenTelemetry's current context), so that its
spans and Langfuse's never parent each other. A BatchSpanProcessor's thread exports; a run's
end only asks a thread to flush.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

import msgspec
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Span, SpanKind, StatusCode, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from owlclaw.tracing.base import Answered, FlushSoon, RunStart
from owlclaw.tracing.otel_content import input_messages, output_messages, provider_of

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
DEFAULT_SERVICE = "owlclaw"
Operation = ga.GenAiOperationNameValues

_parent: ContextVar[Context | None] = ContextVar("owlclaw_otel_parent", default=None)
_root_trace_id: ContextVar[int | None] = ContextVar("owlclaw_otel_trace_id", default=None)
_flusher = FlushSoon("otlp-flush")
_propagator = TraceContextTextMapPropagator()


class RunTraceIds(RandomIdGenerator):
    """Random span ids; a root span's trace id is the run's while its run starts it."""

    def generate_trace_id(self) -> int:
        return _root_trace_id.get() or super().generate_trace_id()


class OtelTracer:
    """The ``Tracer`` of one TracerProvider."""

    def __init__(self, provider: TracerProvider, capture_content: bool):
        self.provider = provider
        self.tracer = provider.get_tracer("owlclaw")
        self.capture_content = capture_content

    @classmethod
    def exporting(cls, processor: SpanProcessor | None = None) -> OtelTracer:
        """A provider configured by the environment, exporting in batches over OTLP/HTTP (or
        through ``processor``)."""
        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
        provider = TracerProvider(resource=resource, id_generator=RunTraceIds())
        provider.add_span_processor(processor or BatchSpanProcessor(OTLPSpanExporter()))
        capture = os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"
        return cls(provider, capture)

    @contextmanager
    def run_trace(self, start: RunStart) -> Iterator[Span]:
        """The run's root span: a root of the trace whose id is the run's, or a child of the
        caller's span; a flush is asked at its end, however it ends."""
        caller = Context()
        if start.traceparent is not None:
            caller = _propagator.extract({"traceparent": start.traceparent})
        attributes: dict[str, AttributeValue] = {
            ga.GEN_AI_OPERATION_NAME: Operation.INVOKE_AGENT.value,
            ga.GEN_AI_AGENT_NAME: start.agent_id,
            ga.GEN_AI_AGENT_ID: start.agent_id,
            ga.GEN_AI_CONVERSATION_ID: str(start.run_id),
            "owlclaw.run.id": str(start.run_id),
            "owlclaw.trigger": start.trigger,
        }
        if start.focus is not None:
            attributes["owlclaw.focus"] = start.focus
        name = f"{Operation.INVOKE_AGENT.value} {start.agent_id}"
        trace_id = _root_trace_id.set(start.run_id.int)
        try:
            with self._span(name, SpanKind.INTERNAL, attributes, caller) as root:
                yield root
        finally:
            _root_trace_id.reset(trace_id)
            _flusher.ask(self.provider.force_flush)

    def run_ended(self, root: Span, status: str, events: Sequence[Any]) -> None:
        """The run's status; a failed or timed-out run's span is an error."""
        root.set_attribute("owlclaw.run.status", status)
        if status in ("failed", "timedout"):
            root.set_attribute(ERROR_TYPE, status)
            root.set_status(StatusCode.ERROR, status)

    def generation(
        self, model: str, messages: list[dict[str, Any]]
    ) -> AbstractContextManager[Span]:
        attributes: dict[str, AttributeValue] = {
            ga.GEN_AI_OPERATION_NAME: Operation.CHAT.value,
            ga.GEN_AI_REQUEST_MODEL: model,
        }
        if (provider := provider_of(model)) is not None:
            attributes[ga.GEN_AI_PROVIDER_NAME] = provider
        if self.capture_content:
            attributes[ga.GEN_AI_INPUT_MESSAGES] = _json(input_messages(messages))
        return self._span(f"{Operation.CHAT.value} {model}", SpanKind.CLIENT, attributes)

    def answered(self, generation: Span, answer: Answered) -> None:
        usage = answer.usage
        generation.set_attribute(ga.GEN_AI_USAGE_INPUT_TOKENS, usage.get("prompt_tokens", 0))
        generation.set_attribute(ga.GEN_AI_USAGE_OUTPUT_TOKENS, usage.get("completion_tokens", 0))
        if answer.response_model is not None:
            generation.set_attribute(ga.GEN_AI_RESPONSE_MODEL, answer.response_model)
        if answer.finish_reason is not None:
            generation.set_attribute(ga.GEN_AI_RESPONSE_FINISH_REASONS, [answer.finish_reason])
        if self.capture_content:
            output = output_messages(answer.message, answer.finish_reason)
            generation.set_attribute(ga.GEN_AI_OUTPUT_MESSAGES, _json(output))

    def failed(self, observation: Span, error: str, error_type: str) -> None:
        observation.set_attribute(ERROR_TYPE, error_type)
        observation.set_status(StatusCode.ERROR, error)

    def tool_call(self, name: str, call_id: str, params: Any) -> AbstractContextManager[Span]:
        attributes: dict[str, AttributeValue] = {
            ga.GEN_AI_OPERATION_NAME: Operation.EXECUTE_TOOL.value,
            ga.GEN_AI_TOOL_NAME: name,
            ga.GEN_AI_TOOL_CALL_ID: call_id,
            ga.GEN_AI_TOOL_TYPE: "function",
        }
        if self.capture_content:
            attributes[ga.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(msgspec.to_builtins(params))
        name = f"{Operation.EXECUTE_TOOL.value} {name}"
        return self._span(name, SpanKind.INTERNAL, attributes)

    def tool_settled(self, tool: Span, told: str, error_code: str | None) -> None:
        if self.capture_content:
            tool.set_attribute(ga.GEN_AI_TOOL_CALL_RESULT, told)
        if error_code is not None:
            self.failed(tool, error_code, error_code)

    def flush(self) -> None:
        self.provider.force_flush()

    @contextmanager
    def _span(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        parent: Context | None = None,
    ) -> Iterator[Span]:
        """A span of this backend, current in its own context while the block runs (its
        parent: ``parent``, else the backend's current span); an escaping exception marks it
        an error."""
        span = self.tracer.start_span(
            name,
            context=parent if parent is not None else _parent.get() or Context(),
            kind=kind,
            attributes=attributes,
            record_exception=False,
        )
        token = _parent.set(set_span_in_context(span, Context()))
        try:
            yield span
        except BaseException as e:
            span.set_attribute(ERROR_TYPE, type(e).__qualname__)
            span.set_status(StatusCode.ERROR, type(e).__qualname__)
            raise
        finally:
            _parent.reset(token)
            span.end()


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()
