"""Runs traced to Langfuse through the SDK's real OTLP exporter, received by a loopback server
standing in for LANGFUSE_HOST: one trace per run, its observations, types, parentage and
attributes as they arrive."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from events import Ledger
from owlclaw import tracing
from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.langfuse_receiver import PROJECT_ID, ReceivedSpan, Receiver
from tests.scripted import call, run_script

pytestmark = pytest.mark.integration

INPUT_COST, OUTPUT_COST = 1e-6, 2e-6
SECONDS_CRON = "*/10 * * * * *"
"""Parses as the tool's arguments, then fails in the tool (INVALID_CRON: six fields)."""


def priced(prefix: str) -> str:
    """A new scripted model's name, with a price so that litellm computes each response's
    cost."""
    script = f"{prefix}{uuid.uuid4().hex[:8]}"
    model = f"scripted/{script}"
    litellm_with_offline_providers().register_model(
        {
            model: {
                "input_cost_per_token": INPUT_COST,
                "output_cost_per_token": OUTPUT_COST,
                "litellm_provider": "scripted",
                "mode": "chat",
            }
        }
    )
    return script


def by_trace(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    traces: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return traces


def kind(span: ReceivedSpan) -> Any:
    return span.attributes.get("langfuse.observation.type")


def decoded(span: ReceivedSpan, key: str) -> Any:
    return json.loads(span.attributes[key])


def assert_run_trace(
    spans: list[ReceivedSpan], agent: str, run_id: str, model: str, answer: str
) -> None:
    """A run's trace: its root (agent), two generations and a tool call under it, the trace's
    name, session, tags and metadata on each."""
    assert {s.scope for s in spans} == {"langfuse-sdk"}
    assert sorted(kind(s) for s in spans) == ["agent", "generation", "generation", "tool"]
    [root] = [s for s in spans if kind(s) == "agent"]
    assert root.name == "agent_run"
    assert root.attributes["langfuse.internal.as_root"] is True
    assert all(s.parent_span_id == root.span_id for s in spans if s is not root)
    for span in spans:  # trace attributes are propagated to every observation
        assert span.attributes["langfuse.trace.name"] == agent
        assert span.attributes["session.id"] == agent
        assert span.attributes["langfuse.trace.tags"] == [f"agent:{agent}", "trigger:webhook"]
        assert decoded(span, "langfuse.trace.metadata.run_id") == run_id
        assert decoded(span, "langfuse.trace.metadata.agent_id") == agent
    assert decoded(root, "langfuse.observation.output")["status"] == "completed"

    first, second = sorted((s for s in spans if kind(s) == "generation"), key=lambda s: s.start_ns)
    for gen in (first, second):
        assert gen.name == "llm"
        assert gen.attributes["langfuse.observation.model.name"] == model
        usage = decoded(gen, "langfuse.observation.usage_details")
        assert usage == {"input": 100, "output": 20, "total": 120}
        cost = decoded(gen, "langfuse.observation.cost_details")["total"]
        assert cost == pytest.approx(100 * INPUT_COST + 20 * OUTPUT_COST)
        assert gen.end_ns > gen.start_ns
        assert decoded(gen, "langfuse.observation.input")[0]["role"] == "system"
    assert decoded(second, "langfuse.observation.output")["content"] == answer
    roles = [m["role"] for m in decoded(second, "langfuse.observation.input")]
    assert roles[-2:] == ["assistant", "tool"]


def test_each_run_is_one_langfuse_trace_of_its_calls(ledger: Ledger, langfuse: Receiver) -> None:
    agent = f"traced-{uuid.uuid4().hex[:6]}"
    runtime = AgentRuntime(ledger, agent, models=["scripted/none"])
    ok_script, bad_script = priced("ok"), priced("bad")
    try:
        ok = run_script(
            runtime,
            ok_script,
            [{"tool_calls": [call("log_decision", reasoning="buy")]}, {"content": "done"}],
            focus="markets",
        )
        bad = run_script(
            runtime,
            bad_script,
            [
                {"tool_calls": [call("schedule_cron", cron_expression=SECONDS_CRON, focus="f")]},
                {"content": "could not schedule"},
            ],
        )
    finally:
        runtime.close()
    tracing.flush()

    assert ok.status == bad.status == "completed"
    traces = by_trace(langfuse.received)
    ok_id, bad_id = (tracing.trace_id_of(uuid.UUID(r.run_id)) for r in (ok, bad))
    assert set(traces) == {ok_id, bad_id}
    assert ok_id == ok.run_id.replace("-", "")

    assert_run_trace(traces[ok_id], agent, ok.run_id, f"scripted/{ok_script}", "done")
    assert_run_trace(
        traces[bad_id], agent, bad.run_id, f"scripted/{bad_script}", "could not schedule"
    )

    [tool] = [s for s in traces[ok_id] if kind(s) == "tool"]
    assert tool.name == "log_decision"
    assert decoded(tool, "langfuse.observation.input")["reasoning"] == "buy"
    assert decoded(tool, "langfuse.observation.metadata.call_id").startswith("call_")
    assert "langfuse.observation.level" not in tool.attributes
    [ok_root] = [s for s in traces[ok_id] if kind(s) == "agent"]
    assert decoded(ok_root, "langfuse.observation.input")["focus"] == "markets"

    [failing] = [s for s in traces[bad_id] if kind(s) == "tool"]
    assert failing.name == "schedule_cron"
    assert decoded(failing, "langfuse.observation.input")["cron_expression"] == SECONDS_CRON
    assert failing.attributes["langfuse.observation.level"] == "ERROR"
    assert failing.attributes["langfuse.observation.status_message"] == "INVALID_CRON"
    assert "INVALID_CRON" in failing.attributes["langfuse.observation.output"]

    assert tracing.trace_url(uuid.UUID(ok.run_id)) == (
        f"{langfuse.url}/project/{PROJECT_ID}/traces/{ok_id}"
    )
