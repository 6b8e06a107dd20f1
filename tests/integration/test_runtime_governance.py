"""Prompt inputs from memory: recalled memories in the prompt, a degraded recall recorded."""

from __future__ import annotations

import asyncio

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from tests.scripted import call, play, run_events

pytestmark = pytest.mark.integration


def test_prompt_carries_recalled_memories_and_recent_activity(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        runtime = AgentRuntime(ledger, "mindful", models=["x"], memory=MemoryStore(view))
        lesson = "Rebounds after a sharp drop are reliable within two hours"
        play(
            runtime,
            [
                {"tool_calls": [call("remember", content=lesson)]},
                {"tool_calls": [call("log_decision", reasoning="wait", decision_type="no_action")]},
                {"content": "noted"},
            ],
        )
        assert MemoryStore(view).wait_for(ledger.log.last_committed(), timeout=10)
        result = play(runtime, [{"content": "ok"}], focus="market crash recovery")
    finally:
        runner.stop()
    prompt = asyncio.run(runtime.briefing.system_prompt("market crash recovery", "webhook"))
    assert lesson in prompt.text
    assert "decided (no_action): wait" in prompt.text and "answered: noted" in prompt.text
    [response] = [e for e in run_events(ledger, result) if isinstance(e, ev.LLMResponded)]
    assert list(response.inputs["memories"]) == [
        str(m.memory_id)
        for m in MemoryStore(view).recall("mindful", "market crash recovery", 5).memories
    ]


def test_degraded_recall_is_recorded_as_a_run_warning(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()  # no runner: the view never reaches the run's position
    runtime = AgentRuntime(
        ledger,
        "hasty",
        models=["x"],
        memory=MemoryStore(view),
        limits=RuntimeConfig(recall_in_prompt=0),
    )
    result = play(
        runtime,
        [
            {"tool_calls": [call("remember", content="a fact")]},
            {"tool_calls": [call("recall", query="fact")]},
            {"content": "ok"},
        ],
    )
    [warning] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunWarning)]
    assert warning.source == "recall" and "has not reached log position" in warning.message
