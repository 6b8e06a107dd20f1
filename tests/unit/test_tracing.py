"""Tracing off (no Langfuse keys): no client, and every traced step gets the one shared no-op
context (what a run traced to Langfuse sends: tests/integration/test_langfuse_traces.py)."""

from __future__ import annotations

import uuid

import pytest

from owlclaw import tracing


def test_without_keys_tracing_is_off_and_makes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-only-half-the-keys")
    run_id = uuid.uuid4()
    assert tracing.enable_langfuse() is False
    contexts = [
        tracing.run_trace(run_id, "agent", "webhook", None, {}),
        tracing.generation("model", []),
        tracing.tool_call("tool", "call_1", {"a": 1}),
    ]
    assert all(c is contexts[0] for c in contexts)
    with contexts[0] as traced:
        assert traced is None
    assert tracing.trace_url(run_id) is None
    assert tracing.trace_id_of(run_id) == run_id.hex
