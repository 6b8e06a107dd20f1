"""list_schedules on the in-memory ledger: a later run sees the agent's active schedules with
their next fire, and nothing it cancelled."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from events.cron import next_fire
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.errors import ToolError
from tests.scripted import call, play, run_events

YEARLY = "0 0 1 1 *"


def listed(ledger: Ledger, runtime: AgentRuntime, **arguments: Any) -> dict[str, Any]:
    result = play(
        runtime, [{"tool_calls": [call("list_schedules", **arguments)]}, {"content": "ok"}]
    )
    [outcome] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert isinstance(outcome.result, dict)
    return outcome.result


def test_once_and_cron_schedules_are_listed_with_their_next_fire(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    created = play(
        runtime,
        [
            {"tool_calls": [call("schedule_once", delay_seconds=600, focus="recheck")]},
            {
                "tool_calls": [
                    call("schedule_cron", cron_expression=YEARLY, focus="new year", on_missed="all")
                ]
            },
            {"content": "ok"},
        ],
    )
    schedules = ledger.load_agent("trader").state.schedules
    [once_id] = [i for i, s in schedules.items() if s.kind == "once"]
    [cron_id] = [i for i, s in schedules.items() if s.kind == "cron"]
    fire_at = schedules[once_id].fire_at
    assert fire_at is not None
    result = listed(ledger, runtime)
    assert result == {
        "schedules": [
            {
                "schedule_id": once_id,
                "kind": "once",
                "focus": "recheck",
                "next_fire": fire_at.isoformat(),
                "cron_expression": None,
                "on_missed": "one",
                "owner_run_id": created.run_id,
            },
            {
                "schedule_id": cron_id,
                "kind": "cron",
                "focus": "new year",
                "next_fire": next_fire(YEARLY, datetime.now(UTC)).isoformat(),
                "cron_expression": YEARLY,
                "on_missed": "all",
                "owner_run_id": created.run_id,
            },
        ],
        "count": 2,
    }
    assert [s["schedule_id"] for s in listed(ledger, runtime, kind="cron")["schedules"]] == [
        cron_id
    ]


def test_no_schedules_give_an_empty_list(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "idle", models=["scripted/none"])
    assert listed(ledger, runtime) == {"schedules": [], "count": 0}


def test_a_cancelled_schedule_is_not_listed(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    play(
        runtime,
        [
            {"tool_calls": [call("schedule_once", delay_seconds=600, focus="a")]},
            {"tool_calls": [call("schedule_once", delay_seconds=900, focus="b")]},
            {"content": "ok"},
        ],
    )
    schedules = ledger.load_agent("trader").state.schedules
    [gone] = [i for i, s in schedules.items() if s.focus == "a"]
    [kept] = [i for i, s in schedules.items() if s.focus == "b"]
    play(runtime, [{"tool_calls": [call("cancel_schedule", schedule_id=gone)]}, {"content": "ok"}])
    assert [s["schedule_id"] for s in listed(ledger, runtime)["schedules"]] == [kept]


@pytest.mark.parametrize("tool", ["schedule_once", "schedule_cron"])
def test_an_unknown_on_missed_is_refused_as_invalid_arguments(tool: str) -> None:
    arguments = {"delay_seconds": 60} if tool == "schedule_once" else {"cron_expression": YEARLY}
    refused = BUILTINS[tool].spec.parse({**arguments, "focus": "x", "on_missed": "every"})
    assert isinstance(refused, ToolError) and refused.error_code == "INVALID_ARGUMENTS"
    assert "on_missed" in refused.error


def test_a_refused_on_missed_schedules_nothing(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    result = play(
        runtime,
        [
            {"tool_calls": [call("schedule_once", delay_seconds=60, focus="x", on_missed="some")]},
            {"content": "ok"},
        ],
    )
    [rejected] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallRejected)]
    assert "on_missed" in rejected.error
    assert ledger.load_agent("trader").state.schedules == {}
