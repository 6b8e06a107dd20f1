"""A caller's traceparent travels with the run: Submit puts it in the run's context (RunQueued,
RunStarted), and the run, and its resumption after a crash, are traced under it (what the spans
then look like: tests/unit/test_otel_spans.py, tests/integration/test_otel_traces.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from events import Ledger
from events.run import Run
from owlclaw import tracing
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Submit
from owlclaw.runtime.agent_runtime import AgentRuntime

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_submitted_traceparent_traces_the_run_and_its_resumption(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    traced: list[str | None] = []
    run_trace = tracing.run_trace

    def recording(*args: Any) -> Any:
        traced.append(args[-1])
        return run_trace(*args)

    monkeypatch.setattr(tracing, "run_trace", recording)
    register_script("traced", [{"content": "Done."}])
    runtime = AgentRuntime(ledger, "traced", models=["scripted/traced"])
    submit = Submit(agent_id="traced", trigger="webhook", traceparent=CALLER)

    _, queued = asyncio.run(runtime.inbox.submit(submit))
    assert queued is not None and queued.context == {"traceparent": CALLER}
    assert asyncio.run(runtime.run_queued(queued)).status == "completed"

    _, crashed = asyncio.run(runtime.inbox.submit(submit))
    assert crashed is not None
    ledger.append(Run.start("traced", crashed))  # the process dies after RunStarted
    assert asyncio.run(runtime.resume(crashed.run_id)).status == "completed"
    assert traced == [CALLER, CALLER]

    plain = asyncio.run(runtime.run("webhook"))  # no traceparent: the run's own trace
    assert plain.status == "completed" and traced[-1] is None
