"""Aggregates change only through events, and replaying those events rebuilds the same state."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import reduce
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.aggregates import Agent, AgentSnapshot, Run, agent_stream_id, run_stream_id
from events.catalog import LedgerEvent


def replay(events: list[LedgerEvent]) -> object:
    return reduce(lambda agg, e: e.mutate(agg), events, None)


def test_stream_ids_are_deterministic_per_agent_and_run() -> None:
    assert agent_stream_id("a") == agent_stream_id("a") != agent_stream_id("b")
    assert run_stream_id("a", 1) != run_stream_id("a", 2)
    assert run_stream_id("a", 1) != run_stream_id("b", 1)


def test_record_applies_and_keeps_the_event_pending_until_collected() -> None:
    agent = Agent.blank(agent_stream_id("trader"))
    event = agent.record(ev.AgentRegistered, agent_id="trader")
    assert agent.version == 1 and agent.agent_id == "trader"
    assert event.originator_version == 1
    assert agent.collect_events() == [event]
    assert agent.collect_events() == []


def test_an_event_of_the_other_stream_is_refused() -> None:
    agent = Agent.blank(agent_stream_id("trader"))
    with pytest.raises(TypeError, match="run stream"):
        agent.record(ev.RunCompleted)


@given(
    ops=st.lists(
        st.sampled_from(["run", "schedule_once", "schedule_cron", "cancel", "fire", "identity"]),
        max_size=40,
    )
)
def test_replaying_recorded_events_rebuilds_the_agent(ops: list[str]) -> None:
    agent = Agent.blank(agent_stream_id("p"))
    agent.record(ev.AgentRegistered, agent_id="p")
    for i, op in enumerate(ops):
        sid = f"s{i % 5}"
        if op == "run":
            agent.record(
                ev.RunQueued, run_id=uuid4(), run_no=agent.state.run_count + 1, trigger="heartbeat"
            )
        elif op == "schedule_once":
            agent.record(
                ev.ScheduleRequested, schedule_id=sid, kind="once", focus="f", delay_seconds=5
            )
        elif op == "schedule_cron":
            agent.record(
                ev.ScheduleRequested, schedule_id=sid, kind="cron", focus="f", cron="*/5 * * * *"
            )
        elif op == "cancel":
            agent.record(ev.ScheduleCancelled, schedule_id=sid)
        elif op == "fire":
            agent.record(ev.TimerFired, schedule_id=sid, fire_time=datetime.now(UTC))
        else:
            agent.record(ev.IdentityLoaded, soul_sha256=str(i), identity_sha256="x")
    rebuilt = replay(agent.collect_events())
    assert isinstance(rebuilt, Agent)
    assert rebuilt.version == agent.version
    assert rebuilt.state == agent.state
    assert len(rebuilt.run_ids()) == agent.state.run_count


def test_snapshot_restores_the_same_state_without_sharing_it() -> None:
    agent = Agent.blank(agent_stream_id("snap"))
    agent.record(ev.AgentRegistered, agent_id="snap")
    agent.record(ev.ScheduleRequested, schedule_id="s1", kind="cron", focus="f", cron="* * * * *")
    restored = AgentSnapshot.take(agent).mutate(None)
    assert restored.state == agent.state and restored.version == agent.version
    restored.state.schedules.clear()
    assert "s1" in agent.state.schedules


def test_run_tracks_open_tool_calls_until_an_outcome_is_recorded() -> None:
    run = Run.blank(run_stream_id("a", 1))
    run.record(ev.RunStarted, agent_id="a", run_no=1, trigger="webhook")
    run.record(ev.ToolCallRequested, call_id="c1", tool="remember", arguments={})
    run.record(ev.ToolCallRequested, call_id="c2", tool="recall", arguments={})
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="remember", result={})
    assert run.state.open_calls == {"c2": "recall"}
    run.record(ev.RunCompleted)
    assert run.state.ended and run.state.status == "completed"
