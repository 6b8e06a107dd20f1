"""Traces are redacted like the ledger: a secret's value handed to any tracing call (focus,
payload, messages, the model's answer, tool arguments and what the model is told, an error, the
end event) reaches no span attribute or status; its marker does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from events import catalog as ev
from events.redaction import KnownSecrets
from owlclaw import tracing
from owlclaw.tracing import langfuse, otel
from owlclaw.tracing.otel_spans import OtelTracer

SECRET = "crm-token-0123456789"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The OTLP backend alone, capturing content, its spans kept in memory; no secret known."""
    exporter = InMemorySpanExporter()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    monkeypatch.setattr(langfuse, "_tracer", None)
    monkeypatch.setattr(otel, "_tracer", OtelTracer.exporting(SimpleSpanProcessor(exporter)))
    monkeypatch.setattr(tracing, "_known", KnownSecrets())
    yield exporter


def leaky_run() -> None:
    run_id = uuid.uuid4()
    with tracing.run_trace(run_id, "desk", "webhook", f"use {SECRET}", {"t": SECRET}) as root:
        messages = [{"role": "user", "content": f"token {SECRET}"}]
        with tracing.generation("openai/gpt-4o", messages) as gen:
            tracing.failed(gen, f"401 for key {SECRET}", "AuthenticationError")
        with tracing.generation("openai/gpt-4o", messages) as gen:
            answer = {"role": "assistant", "content": f"The token is {SECRET}."}
            tracing.answered(gen, answer, {"total_tokens": 3}, 0.0, "stop")
        with tracing.tool_call("crm", "c1", {"token": SECRET}) as tool:
            tracing.tool_settled(tool, f'{{"echo": "{SECRET}"}}', "INTERNAL")
        end = ev.RunFailed(
            originator_id=run_id,
            originator_version=9,
            timestamp=datetime.now(UTC),
            error=f"ValueError: bad {SECRET}",
        )
        tracing.run_ended(root, "failed", [end])


def span_texts(exporter: InMemorySpanExporter) -> list[str]:
    return [
        text
        for span in exporter.get_finished_spans()
        for text in (
            *(str(v) for v in (span.attributes or {}).values()),
            span.status.description or "",
        )
    ]


def test_a_known_secret_reaches_no_span(spans: InMemorySpanExporter) -> None:
    tracing.redact({"CRM_TOKEN": SECRET})
    leaky_run()
    texts = span_texts(spans)
    assert not [t for t in texts if SECRET in t]
    redacted = [t for t in texts if "[redacted:CRM_TOKEN]" in t]
    assert len(redacted) >= 4  # input and output messages, tool arguments and result


def test_without_known_secrets_spans_are_as_given(spans: InMemorySpanExporter) -> None:
    leaky_run()
    assert [t for t in span_texts(spans) if SECRET in t]
    assert not [t for t in span_texts(spans) if "[redacted:" in t]
