"""update_plan: the run's plan as an event the run's state folds, each call replacing the last;
malformed plans are refused as the model's error, never recorded."""

from __future__ import annotations

import io
import json
import uuid
from contextlib import nullcontext
from typing import Any

import pytest
from rich.console import Console

from events import Ledger
from events import catalog as ev
from events.erasure import erase
from events.sealing import ERASED_VALUE
from owlclaw.audit.verify import replay_run
from owlclaw.cli import audit
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.scripted import call, play, run_events

PLAN = [
    {"text": "read [the] queue", "status": "done"},
    {"text": "reply", "status": "in_progress"},
]


def plan(*items: Any) -> dict[str, Any]:
    return {"tool_calls": [call("update_plan", items=list(items))]}


def test_each_call_records_the_plan_and_the_last_one_is_the_runs_plan(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    result = play(
        runtime,
        [
            plan({"text": "read the queue"}, {"text": "reply", "status": "pending"}),
            plan(
                {"text": "read the queue", "status": "done"},
                {"text": "reply", "status": "in_progress"},
            ),
            {"content": "ok"},
        ],
    )
    events = run_events(ledger, result)
    first, second = [e for e in events if isinstance(e, ev.PlanUpdated)]
    assert first.items == [
        {"text": "read the queue", "status": "pending"},
        {"text": "reply", "status": "pending"},
    ]
    succeeded = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert [s.call_id for s in succeeded] == [first.call_id, second.call_id]
    assert succeeded[1].result == {"items": 2, "done": 1}
    state = ledger.load_run(uuid.UUID(result.run_id)).state
    assert state.plan == [
        {"text": "read the queue", "status": "done"},
        {"text": "reply", "status": "in_progress"},
    ]


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        (
            [{"text": "x", "status": "started"}],
            "Invalid enum value 'started' - at `$.items[0].status`",
        ),
        ([{"text": f"step {i}"} for i in range(21)], "length <= 20 - at `$.items`"),
        ([{"text": "y" * 201}], "length <= 200 - at `$.items[0].text`"),
        ([{"text": "z", "owner": "me"}], "unknown field `owner`"),
        ([], "length >= 1 - at `$.items`"),
    ],
)
def test_a_malformed_plan_is_refused_with_the_reason_and_leaves_the_plan(
    ledger: Ledger, items: list[Any], reason: str
) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    result = play(
        runtime,
        [plan({"text": "a real step", "status": "in_progress"}), plan(*items), {"content": "ok"}],
    )
    assert result.status == "completed"  # the model got the error back and answered
    events = run_events(ledger, result)
    assert len([e for e in events if isinstance(e, ev.PlanUpdated)]) == 1
    [rejected] = [e for e in events if isinstance(e, ev.ToolCallRejected)]
    assert rejected.tool == "update_plan" and reason in rejected.error
    state = ledger.load_run(uuid.UUID(result.run_id)).state
    assert state.plan == [{"text": "a real step", "status": "in_progress"}]


def test_a_run_without_a_plan_has_none(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    result = play(runtime, [{"content": "ok"}])
    assert ledger.load_run(uuid.UUID(result.run_id)).state.plan == []


def test_owlclaw_explain_shows_the_runs_current_plan(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    play(runtime, [plan({"text": "old step"}), plan(*PLAN), {"content": "ok"}])
    monkeypatch.setattr(audit, "ask_server", lambda *_: None)  # no server: read here
    monkeypatch.setattr(audit, "open_ledger", lambda _config: nullcontext((None, ledger)))
    monkeypatch.setattr(audit, "out", shown := Console(file=io.StringIO(), width=100, record=True))
    audit.explain("planner", 1)
    lines = shown.export_text().splitlines()
    at = lines.index("plan: ")
    assert lines[at + 1 : at + 3] == ["  done        read [the] queue", "  in_progress reply"]
    assert lines[at + 3].startswith("step 1 ")  # only the last plan: the steps follow
    audit.explain("planner", 1, as_json=True)
    assert json.loads(capsys.readouterr().out)["plan"] == PLAN


def test_a_run_that_planned_replays_as_recorded(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    play(runtime, [plan(*PLAN), {"content": "ok"}])
    runtime.close()
    assert replay_run(ledger, "planner", 1).matched


def test_an_erased_run_has_no_plan_left_to_read(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "planner", models=["x"])
    result = play(runtime, [plan(*PLAN), {"content": "ok"}])
    run_id = uuid.UUID(result.run_id)
    erase(ledger, "run", str(run_id), "asked", "dpo")
    [updated] = [e for e in ledger.stream(run_id) if isinstance(e, ev.PlanUpdated)]
    assert updated.items == ERASED_VALUE
    assert ledger.load_run(run_id).state.plan == []
