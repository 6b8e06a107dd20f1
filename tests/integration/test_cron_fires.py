"""A cron expression is judged by its fires: schedule_cron refuses one that never fires, and the
views keep going over one that an older version accepted into the log."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.timers.registrations import TimerRegistrations
from projections import ProjectionRunner, SchedulesView
from tests.postgres import rows

pytestmark = pytest.mark.integration


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_schedule_cron_of_feb_30_is_refused_as_invalid_cron_the_model_reads(
    ledger: Ledger,
) -> None:
    register_script(
        "feb30",
        [
            {"tool_calls": [call("schedule_cron", cron_expression="0 0 30 2 *", focus="pay")]},
            {
                "tool_calls": [
                    call(
                        "log_decision",
                        reasoning="{{result.schedule_cron.error_code}}: "
                        "{{result.schedule_cron.error}}",
                    )
                ]
            },
            {"content": "That date does not exist."},
        ],
    )
    runtime = AgentRuntime(ledger, "payer", models=["scripted/feb30"])
    result = asyncio.run(runtime.run(trigger="webhook"))
    assert result.status == "completed"
    agent = ledger.load_agent("payer")
    events = ledger.stream(agent.id) + ledger.stream(uuid.UUID(result.run_id))
    [failed] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert (failed.tool, failed.error_code) == ("schedule_cron", "INVALID_CRON")
    assert "never fires: no fire time in the next 5 years" in failed.error
    [decision] = [e for e in events if isinstance(e, ev.DecisionLogged)]
    assert decision.reasoning == f"INVALID_CRON: {failed.error}"  # what the model was told
    assert not [e for e in events if isinstance(e, ev.ScheduleRequested)]
    assert not agent.state.schedules


def test_views_record_no_fire_for_a_never_firing_cron_already_in_the_log(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("old")
    for schedule_id, cron in (("s-feb30", "0 0 30 2 *"), ("s-hourly", "0 * * * *")):
        agent.record(
            ev.ScheduleRequested,
            schedule_id=schedule_id,
            kind="cron",
            focus="review",
            cron=cron,
            agent_id="old",
        )
    ledger.append(agent)
    [hourly] = [
        e
        for e in ledger.stream(agent.id)
        if isinstance(e, ev.ScheduleRequested) and e.schedule_id == "s-hourly"
    ]
    expected = hourly.timestamp.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    views = [SchedulesView(ledger), TimerRegistrations(ledger, records=False)]
    for view in views:
        view.create_table()
        assert ProjectionRunner(ledger, view).catch_up() == ledger.log.head()
    assert rows(
        fresh_db,
        "SELECT schedule_id, status, next_fire_at, last_outcome FROM schedules ORDER BY 1",
    ) == [("s-feb30", "requested", None, "never fires"), ("s-hourly", "requested", expected, None)]
    assert rows(fresh_db, "SELECT schedule_id, next_fire_at FROM timers") == [
        ("s-hourly", expected)
    ]
    assert rows(fresh_db, "SELECT count(*) FROM projection_errors") == [(0,)]
