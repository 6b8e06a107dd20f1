"""An operator's cancel of a schedule (the console's action) without a browser: it goes through
the agent's writer, names who did it, and the timer service unregisters it from its backend."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from events.agent_state import UnknownSchedule
from owlclaw.messages import CancelSchedule, Fire
from owlclaw.timers.registrations import TimerRegistrations
from projections import ProjectionRunner, SchedulesView
from tests.scripted import agent_events
from tests.timers import delivering, host, schedule

pytestmark = pytest.mark.integration


class RecordingBackend:
    """An external timer backend: holds a timer per schedule, and records each cancel."""

    name = "external"

    def __init__(self) -> None:
        self.cancelled: list[tuple[str, str]] = []

    def holds(self, row: dict[str, Any], now: datetime) -> bool:
        return True

    def register(self, row: dict[str, Any]) -> str:
        return f"ext-{row['schedule_id']}"

    def cancel(self, backend_id: str, kind: str) -> None:
        self.cancelled.append((backend_id, kind))


def cancels(ledger: Ledger, agent_id: str) -> list[ev.ScheduleCancelled]:
    return [e for e in agent_events(ledger, agent_id) if isinstance(e, ev.ScheduleCancelled)]


def requested_schedule(ledger: Ledger, agent_id: str) -> str:
    schedule(ledger, agent_id, "schedule_once", delay_seconds=600, focus="later")
    [requested] = [e for e in agent_events(ledger, agent_id) if isinstance(e, ev.ScheduleRequested)]
    return requested.schedule_id


def test_operator_cancel_is_recorded_with_who_and_unregisters_the_timer(ledger: Ledger) -> None:
    backend = RecordingBackend()
    timers = TimerRegistrations(ledger, backend=backend, records=False)
    timers.create_table()
    schedules = SchedulesView(ledger)
    schedules.create_table()
    schedule_id = requested_schedule(ledger, "ops")
    ProjectionRunner(ledger, timers).catch_up()

    async def cancel() -> int:
        agents = host(ledger, "act")
        try:
            return await agents.ask(
                CancelSchedule(
                    agent_id="ops", schedule_id=schedule_id, by="console:alice", reason="not needed"
                )
            )
        finally:
            await agents.close()

    position = asyncio.run(cancel())
    [cancelled] = cancels(ledger, "ops")
    assert (cancelled.schedule_id, cancelled.by, cancelled.reason) == (
        schedule_id,
        "console:alice",
        "not needed",
    )
    assert ledger.log.read(after=position - 1, limit=1)[0].event == cancelled
    assert schedule_id not in ledger.load_agent("ops").state.schedules
    ProjectionRunner(ledger, timers).catch_up()
    assert backend.cancelled == [(f"ext-{schedule_id}", "once")]
    ProjectionRunner(ledger, schedules).catch_up()
    with schedules.transaction(commit=False) as curs:
        row = curs.execute(
            schedules.sql("SELECT status, last_outcome FROM {schedules} WHERE schedule_id = %s"),
            (schedule_id,),
        ).fetchone()
    assert row is not None
    assert (row["status"], row["last_outcome"]) == (
        "cancelled",
        "cancelled by console:alice: not needed",
    )
    # a fire the backend still delivers is refused by the agent
    late = Fire(agent_id="ops", schedule_id=schedule_id, fire_time=cancelled.timestamp)
    outcome = delivering(ledger, lambda deliver: deliver(late))
    assert (outcome.kind, outcome.run_id) == ("duplicate", None)


def test_cancelling_a_schedule_that_is_not_active_records_nothing(ledger: Ledger) -> None:
    schedule_id = requested_schedule(ledger, "ops")
    before = agent_events(ledger, "ops")

    async def cancel_twice() -> None:
        agents = host(ledger, "act")
        try:
            with pytest.raises(UnknownSchedule, match="no active schedule 'nope' of agent ops"):
                await agents.ask(
                    CancelSchedule(agent_id="ops", schedule_id="nope", by="console:alice")
                )
            await agents.ask(
                CancelSchedule(agent_id="ops", schedule_id=schedule_id, by="console:alice")
            )
            with pytest.raises(UnknownSchedule, match=schedule_id):
                await agents.ask(
                    CancelSchedule(agent_id="ops", schedule_id=schedule_id, by="console:bob")
                )
        finally:
            await agents.close()

    asyncio.run(cancel_twice())
    after = agent_events(ledger, "ops")
    assert after[: len(before)] == before
    assert [type(e) for e in after[len(before) :]] == [ev.ScheduleCancelled]


def test_the_agents_own_cancel_is_recorded_as_by_agent(ledger: Ledger) -> None:
    schedule_id = requested_schedule(ledger, "self")
    schedule(ledger, "self", "cancel_schedule", schedule_id=schedule_id)
    [cancelled] = cancels(ledger, "self")
    assert cancelled.by == "agent"
    assert cancelled.reason.startswith("cancelled by run ")
