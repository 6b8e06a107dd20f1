"""Runs traced through the OpenTelemetry SDK's real OTLP/HTTP exporter, configured only by the
standard OTEL_* variables, to a loopback receiver that decodes the protobuf: span names, kinds,
parentage, trace ids and the GenAI conventions' attributes as they arrive; and a webhook
trigger carrying a W3C traceparent continuing the caller's trace."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from events import Ledger
from events import catalog as ev
from owlclaw import tracing
from owlclaw.app import load_app
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.apps import make_app
from tests.langfuse_receiver import Receiver
from tests.otlp_receiver import OtlpReceiver, OtlpSpan, otlp_receiver
from tests.scripted import call, run_script
from tests.served import local_service

pytestmark = pytest.mark.integration

CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
ONE_TOOL_CALL = [{"tool_calls": [call("log_decision", reasoning="buy")]}, {"content": "done"}]


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """OTLP export to the receiver, configured as an operator would; afterwards the variables
    are gone and tracing is off again."""
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "owlclaw-under-test")
        for name in ("LANGFUSE_PUBLIC_KEY", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            monkeypatch.delenv(name, raising=False)
        yield receiver
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
        monkeypatch.delenv("OTEL_SERVICE_NAME")
        tracing.enable()


def assert_run(spans: list[OtlpSpan], agent: str, model: str) -> OtlpSpan:
    """A run's trace: two model calls and one tool call under its root; the root, for more
    checks."""
    [root] = [s for s in spans if s.name == f"invoke_agent {agent}"]
    chats = sorted((s for s in spans if s.name == f"chat {model}"), key=lambda s: s.start_ns)
    [tool] = [s for s in spans if s.name == "execute_tool log_decision"]
    assert len(spans) == 4 and len(chats) == 2
    assert root.kind == "SPAN_KIND_INTERNAL"
    assert {c.kind for c in chats} == {"SPAN_KIND_CLIENT"}
    assert tool.kind == "SPAN_KIND_INTERNAL"
    assert {s.parent_span_id for s in (*chats, tool)} == {root.span_id}
    assert {s.scope for s in spans} == {"owlclaw"}
    assert root.resource["service.name"] == "owlclaw-under-test"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == agent
    assert root.attributes["gen_ai.agent.id"] == agent
    assert root.attributes["owlclaw.run.status"] == "completed"
    for chat, finish in zip(chats, ("tool_calls", "stop"), strict=True):
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == model
        assert chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.usage.input_tokens"] == 100
        assert chat.attributes["gen_ai.usage.output_tokens"] == 20
        assert chat.attributes["gen_ai.response.finish_reasons"] == [finish]
    assert chats[0].start_ns < tool.start_ns < chats[1].start_ns
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "log_decision"
    assert str(tool.attributes["gen_ai.tool.call.id"]).startswith("call_")
    assert "error.type" not in tool.attributes
    assert {s.status for s in spans} == {"STATUS_CODE_UNSET"}
    recorded = {k for s in spans for k in s.attributes}  # no content unless opted in
    assert not {k for k in recorded if k.endswith((".messages", ".arguments", ".result"))}
    return root


def test_a_run_is_one_otlp_trace_whose_id_is_the_run_id(ledger: Ledger, otlp: OtlpReceiver) -> None:
    agent = f"otel-{uuid.uuid4().hex[:6]}"
    script = f"otel{uuid.uuid4().hex[:8]}"
    runtime = AgentRuntime(ledger, agent, models=["scripted/none"])
    try:
        result = run_script(runtime, script, ONE_TOOL_CALL, focus="markets")
    finally:
        runtime.close()
    tracing.flush()

    assert result.status == "completed"
    run_id = uuid.UUID(result.run_id)
    assert otlp.content_types == {"application/x-protobuf"}
    assert {s.trace_id for s in otlp.received} == {run_id.hex}
    root = assert_run(otlp.received, agent, f"scripted/{script}")
    assert root.parent_span_id == ""
    assert root.attributes["owlclaw.run.id"] == str(run_id)
    assert root.attributes["owlclaw.focus"] == "markets"


def test_a_webhook_trigger_with_a_traceparent_continues_the_callers_trace(
    fresh_db: Database, tmp_path: Path, otlp: OtlpReceiver
) -> None:
    root_dir = make_app(
        tmp_path / "traced", config='[agent]\nid = "traced"\nmodels = ["scripted/traced"]\n'
    )
    (root_dir / "scripts").mkdir()
    (root_dir / "scripts" / "traced.json").write_text(json.dumps({"steps": ONE_TOOL_CALL}))
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(root_dir)])
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"

    async def trigger() -> str:
        async with serving(service, config):
            url = f"http://127.0.0.1:{config.server.port}/agents/traced/trigger"
            headers = {"Authorization": "Bearer test-token", "traceparent": traceparent}
            async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
                answer = await http.post(url, json={"wait": True}, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["status"] == "completed"
            assert service.ledger is not None
            run_id = uuid.UUID(answer.json()["run_id"])
            [started] = [e for e in service.ledger.stream(run_id) if isinstance(e, ev.RunStarted)]
            assert started.context == {"traceparent": traceparent}
            return str(run_id)

    run_id = asyncio.run(trigger())
    tracing.flush()

    assert {s.trace_id for s in otlp.received} == {CALLER_TRACE}
    root = assert_run(otlp.received, "traced", "scripted/traced")
    assert root.parent_span_id == CALLER_SPAN
    assert root.attributes["owlclaw.run.id"] == run_id


def test_with_langfuse_on_too_each_backend_keeps_its_own_parentage(
    ledger: Ledger, otlp: OtlpReceiver, langfuse: Receiver
) -> None:
    """The two backends' spans never parent each other: each trace arrives whole at its own
    receiver."""
    agent, script = f"both-{uuid.uuid4().hex[:6]}", f"both{uuid.uuid4().hex[:8]}"
    runtime = AgentRuntime(ledger, agent, models=["scripted/none"])
    try:
        result = run_script(runtime, script, ONE_TOOL_CALL)
    finally:
        runtime.close()
    tracing.flush()

    run_id = uuid.UUID(result.run_id)
    assert assert_run(otlp.received, agent, f"scripted/{script}").parent_span_id == ""
    observations = [s for s in langfuse.received if s.trace_id == run_id.hex]
    [agent_run] = [s for s in observations if s.name == "agent_run"]
    assert len(observations) == 4
    assert {s.parent_span_id for s in observations if s is not agent_run} == {agent_run.span_id}
