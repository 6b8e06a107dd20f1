"""The runtime with the scripted model on the real ledger where PostgreSQL matters: the recall
scenario (the memory view), commits per tool step, bad arguments (traces:
tests/integration/test_langfuse_traces.py). The memory limit and
forget: tests/*/test_memory_lifecycle.py. The scenarios that need only a ledger run in memory:
tests/unit/test_runtime_scenarios.py."""

from __future__ import annotations

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from tests.scripted import call, run_events, run_script

pytestmark = pytest.mark.integration


def test_scenario_2_remember_then_recall_in_a_later_run(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    try:
        recall = MemoryStore(view, wait_s=60)  # the view absorbs the lesson: at most 60 s
        runtime = AgentRuntime(ledger, "trader", models=["scripted/none"], memory=recall)
        lesson = "After sharp drop, rebound signals accurate within 2h"
        run_script(
            runtime,
            "s2a",
            [
                {"tool_calls": [call("remember", content=lesson, tags=["trading", "lesson"])]},
                {"content": "Noted."},
            ],
        )
        result = run_script(
            runtime,
            "s2b",
            [
                {"tool_calls": [call("recall", query="market crash recovery")]},
                {"content": "Rebounds are reliable within 2 hours."},
            ],
        )
    finally:
        runner.stop()
    [outcome] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert outcome.result["memories"][0]["content"] == lesson
    assert outcome.result["memories"][0]["tags"] == ["trading", "lesson"]


def test_bad_arguments_go_back_to_the_model_and_into_the_ledger(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    result = run_script(
        runtime,
        "bad",
        [
            {
                "tool_calls": [
                    {"name": "schedule_once", "arguments": "{not json"},
                    call("schedule_once", delay_seconds=0, focus="now"),
                    call("schedule_cron", cron_expression="*/10 * * * * *", focus="f"),
                    call("teleport", to="mars"),
                ]
            },
            {"content": "I will fix my arguments next time."},
        ],
    )
    assert result.status == "completed"
    events = run_events(ledger, result)
    rejected = [e.error for e in events if isinstance(e, ev.ToolCallRejected)]
    assert len(rejected) == 3
    assert "not valid JSON" in rejected[0] and "delay_seconds" in rejected[1]
    assert "unknown tool 'teleport'" in rejected[2]
    [cron] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert cron.error_code == "INVALID_CRON"


def test_one_commit_per_tool_step(ledger: Ledger, fresh_db: Database) -> None:
    import psycopg

    runtime = AgentRuntime(ledger, "counter", models=["scripted/none"])
    steps = [{"tool_calls": [call("log_decision", reasoning=f"step {i}")]} for i in range(5)]
    result = run_script(runtime, "commits", [*steps, {"content": "done"}])
    with psycopg.connect(fresh_db.url) as conn:
        transactions = conn.execute(
            "SELECT count(DISTINCT transaction_id) FROM ledger_events WHERE originator_id = %s",
            (result.run_id,),
        ).fetchone()
    # 5 tool steps (each commits its request, carrying the previous result) + the final commit
    assert transactions == (6,)
