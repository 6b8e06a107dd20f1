"""The OTLP backend's spans as the tracing calls make them, kept by an in-memory exporter: names,
kinds, parentage, trace ids and the GenAI conventions' attributes (what reaches a real OTLP
endpoint: tests/integration/test_otel_traces.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from owlclaw import tracing
from owlclaw.tracing import langfuse, otel
from owlclaw.tracing.otel_content import provider_of
from owlclaw.tracing.otel_spans import OtelTracer

CALLER_TRACE, CALLER_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
MESSAGES = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Trigger: webhook"},
]
TOOL_CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "log_decision", "arguments": '{"reasoning": "buy"}'},
        }
    ],
}
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The OTLP backend alone, its spans kept in memory."""
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(langfuse, "_tracer", None)
    monkeypatch.setattr(otel, "_tracer", OtelTracer.exporting(SimpleSpanProcessor(exporter)))
    yield exporter


def traced_run(
    run_id: uuid.UUID, traceparent: str | None = None, tool_error: str | None = None
) -> None:
    """A run with one model call and one tool call, through the tracing calls."""
    with tracing.run_trace(run_id, "trader", "webhook", "markets", {}, traceparent) as root:
        with tracing.generation("openai/gpt-4o", MESSAGES) as gen:
            tracing.answered(gen, TOOL_CALL_MESSAGE, USAGE, 0.01, "tool_calls", "gpt-4o-2024")
        with tracing.tool_call("log_decision", "call_1", {"reasoning": "buy"}) as tool:
            tracing.tool_settled(tool, '{"ok": true}', tool_error)
        tracing.run_ended(root, "completed", [])


def named(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_a_run_is_an_invoke_agent_span_over_its_chat_and_execute_tool_spans(
    spans: InMemorySpanExporter,
) -> None:
    run_id = uuid.uuid4()
    traced_run(run_id)
    by_name = named(spans)
    assert set(by_name) == {
        "invoke_agent trader",
        "chat openai/gpt-4o",
        "execute_tool log_decision",
    }
    root = by_name["invoke_agent trader"]
    chat, tool = by_name["chat openai/gpt-4o"], by_name["execute_tool log_decision"]
    assert root.parent is None
    assert {s.context.trace_id for s in by_name.values()} == {run_id.int}
    assert chat.parent == tool.parent == root.context
    assert (root.kind, chat.kind, tool.kind) == (
        SpanKind.INTERNAL,
        SpanKind.CLIENT,
        SpanKind.INTERNAL,
    )
    assert root.resource.attributes["service.name"] == "owlclaw"

    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "trader",
        "gen_ai.agent.id": "trader",
        "gen_ai.conversation.id": str(run_id),
        "owlclaw.run.id": str(run_id),
        "owlclaw.trigger": "webhook",
        "owlclaw.focus": "markets",
        "owlclaw.run.status": "completed",
    }
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "openai/gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "log_decision",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
    }
    assert {s.status.status_code for s in by_name.values()} == {StatusCode.UNSET}


def test_a_failed_tool_call_and_a_failed_run_are_errors(spans: InMemorySpanExporter) -> None:
    traced_run(uuid.uuid4(), tool_error="INVALID_CRON")
    tool = named(spans)["execute_tool log_decision"]
    assert tool.attributes is not None and tool.attributes["error.type"] == "INVALID_CRON"
    assert tool.status.status_code is StatusCode.ERROR

    with tracing.run_trace(uuid.uuid4(), "trader", "cron", None, {}) as root:
        with tracing.generation("anthropic/claude", MESSAGES) as gen:
            tracing.failed(gen, "anthropic/claude: Timeout: slow", "Timeout")
        tracing.run_ended(root, "failed", [])
    chat, run = named(spans)["chat anthropic/claude"], named(spans)["invoke_agent trader"]
    assert chat.attributes is not None and chat.attributes["error.type"] == "Timeout"
    assert chat.status.status_code is StatusCode.ERROR
    assert run.attributes is not None and run.attributes["error.type"] == "failed"
    assert run.status.status_code is StatusCode.ERROR


def test_a_run_started_with_a_traceparent_is_a_child_of_the_callers_span(
    spans: InMemorySpanExporter,
) -> None:
    traced_run(uuid.uuid4(), traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
    by_name = named(spans)
    root = by_name["invoke_agent trader"]
    assert root.parent is not None and root.parent.is_remote
    assert f"{root.parent.span_id:016x}" == CALLER_SPAN
    assert {f"{s.context.trace_id:032x}" for s in by_name.values()} == {CALLER_TRACE}

    spans.clear()  # the caller's decision not to sample is kept
    traced_run(uuid.uuid4(), traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-00")
    assert spans.get_finished_spans() == ()


def test_an_invalid_traceparent_is_ignored_and_a_resumed_run_joins_its_trace(
    spans: InMemorySpanExporter,
) -> None:
    run_id = uuid.uuid4()
    traced_run(run_id, traceparent="00-not-a-trace-parent-01")
    traced_run(run_id)  # resumed: a second root in the same trace
    roots = [s for s in spans.get_finished_spans() if s.name == "invoke_agent trader"]
    assert [r.parent for r in roots] == [None, None]
    assert {r.context.trace_id for r in roots} == {run_id.int}
    assert roots[0].context.span_id != roots[1].context.span_id


def test_spans_are_current_only_in_the_backends_own_context(spans: InMemorySpanExporter) -> None:
    """OpenTelemetry's current span (Langfuse's observations nest by it) is left alone."""
    with tracing.run_trace(uuid.uuid4(), "trader", "webhook", None, {}):
        assert trace.get_current_span() is trace.INVALID_SPAN
    with tracing.generation("openai/gpt-4o", MESSAGES):  # outside a run: a root of its own
        pass
    assert named(spans)["chat openai/gpt-4o"].parent is None


def test_message_content_is_recorded_only_when_opted_in(
    monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter
) -> None:
    traced_run(uuid.uuid4())
    recorded = [k for s in spans.get_finished_spans() for k in s.attributes or {}]
    assert not [k for k in recorded if "messages" in k or "arguments" in k or "result" in k]

    spans.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    monkeypatch.setattr(otel, "_tracer", OtelTracer.exporting(SimpleSpanProcessor(spans)))
    traced_run(uuid.uuid4())
    chat = named(spans)["chat openai/gpt-4o"].attributes or {}
    tool = named(spans)["execute_tool log_decision"].attributes or {}
    assert json.loads(str(chat["gen_ai.input.messages"])) == [
        {"role": "system", "parts": [{"type": "text", "content": "You are an agent."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Trigger: webhook"}]},
    ]
    assert json.loads(str(chat["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "log_decision",
                    "arguments": '{"reasoning": "buy"}',
                }
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"reasoning": "buy"}
    assert tool["gen_ai.tool.call.result"] == '{"ok": true}'


def test_the_provider_is_named_as_the_conventions_name_it() -> None:
    assert provider_of("openai/gpt-4o") == "openai"
    assert provider_of("anthropic/claude-sonnet-4") == "anthropic"
    assert provider_of("bedrock/anthropic.claude-3") == "aws.bedrock"
    assert provider_of("vertex_ai/gemini-2.5-pro") == "gcp.vertex_ai"
    assert provider_of("scripted/trader") == "scripted"
    assert provider_of("gpt-4o") is None


def test_otlp_export_is_on_only_with_an_endpoint_and_off_imports_nothing() -> None:
    """In a fresh interpreter: no endpoint, no SDK imported; an endpoint makes an exporting
    provider; OTEL_SDK_DISABLED switches it off again."""
    script = """
import os, sys
from owlclaw import tracing
from owlclaw.tracing import otel
for k in [k for k in os.environ if k.startswith(("OTEL_", "LANGFUSE_"))]:
    del os.environ[k]
off = tracing.enable()
imported = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "langfuse")))
os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
on = tracing.enable() and otel._tracer is not None
os.environ["OTEL_SDK_DISABLED"] = "true"
disabled = tracing.enable()
print(off, imported, on, disabled)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split("\n")[0] == "False [] True False"
