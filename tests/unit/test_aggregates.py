"""Aggregates change only through events, and replaying those events rebuilds the same state."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.agent import Agent, AgentSnapshot
from events.agent_state import IDEMPOTENCY_KEYS_KEPT
from events.aggregate import projector
from events.catalog import LedgerEvent
from events.codec import MsgspecMapper, topic_of
from events.run import Run
from events.streams import agent_stream_id, run_stream_id


def replay(events: list[LedgerEvent]) -> object:
    return projector(Agent)(None, events)


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
    restored = AgentSnapshot.take(agent).restore()
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


def registered(agent_id: str) -> Agent:
    agent = Agent.blank(agent_stream_id(agent_id))
    agent.record(ev.AgentRegistered, agent_id=agent_id)
    return agent


def test_queue_run_numbers_runs_and_marks_an_idle_heartbeat() -> None:
    agent = registered("q")
    first = agent.queue_run("heartbeat")
    agent.record(ev.InboundReceived, source="webhook")
    second = agent.queue_run("heartbeat")
    third = agent.queue_run("webhook")
    assert [q.run_no for q in (first, second, third)] == [1, 2, 3]
    assert [q.run_id for q in (first, second, third)] == [run_stream_id("q", n) for n in (1, 2, 3)]
    assert (first.idle, second.idle, third.idle) == (True, False, False)


def test_an_idempotency_key_names_its_run_and_old_keys_are_forgotten() -> None:
    agent = registered("k")
    queued = agent.queue_run("webhook", idempotency_key="key-0")
    assert agent.run_for_key("key-0") == queued.run_id and agent.run_for_key("other") is None
    for n in range(1, IDEMPOTENCY_KEYS_KEPT + 1):
        agent.queue_run("webhook", idempotency_key=f"key-{n}")
    assert agent.run_for_key("key-0") is None  # the oldest one
    assert agent.run_for_key(f"key-{IDEMPOTENCY_KEYS_KEPT}") == agent.state.last_run_id
    assert len(agent.state.idempotency_keys) == IDEMPOTENCY_KEYS_KEPT


def test_a_fire_is_judged_then_queued_and_a_second_delivery_is_a_duplicate() -> None:
    agent = registered("f")
    owner = agent.queue_run("webhook").run_id
    at = datetime(2026, 1, 1, tzinfo=UTC)
    agent.record(
        ev.ScheduleRequested, schedule_id="s", kind="once", focus="look", owner_run_id=owner
    )
    kind, reason, queued = agent.receive_fire("s", at)
    assert (kind, reason) == ("fire", "") and queued is not None
    assert (queued.trigger, queued.focus, queued.run_no) == ("schedule_once", "look", 2)
    assert queued.context["scheduled_by_run_id"] == str(owner)
    fired = [e for e in agent.pending_events if isinstance(e, ev.TimerFired)]
    assert [f.run_id for f in fired] == [queued.run_id]
    again = agent.receive_fire("s", at)
    assert again == ("duplicate", "this one-off schedule already fired", None)
    assert agent.receive_fire("nope", at) == ("duplicate", "no such schedule of this agent", None)
    assert agent.state.run_count == 2


def test_a_fire_the_misfire_policy_gave_up_is_recorded_as_missed() -> None:
    agent = registered("m")
    agent.record(ev.ScheduleRequested, schedule_id="s", kind="cron", focus="f", cron="* * * * *")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert agent.receive_fire("s", at, missed="skipped") == ("missed", "skipped", None)
    assert isinstance(agent.pending_events[-1], ev.TimerMissed)
    assert agent.state.run_count == 0


def test_a_run_ends_once() -> None:
    agent = registered("e")
    run = Run.start("e", agent.queue_run("webhook", "focus"))
    assert run.state.trigger == "webhook" and run.state.focus == "focus"
    run.end(ev.RunCompleted, answer="done", duration_ms=5.0)
    assert run.state.ended and run.state.duration_ms == 5.0
    with pytest.raises(RuntimeError, match="already ended"):
        run.end(ev.RunFailed, error="again")


def test_an_app_failure_is_recorded_once_per_error_until_an_identity_loads() -> None:
    agent = Agent.blank(agent_stream_id("looper"))
    agent.record(ev.AgentRegistered, agent_id="looper")
    hung = "/apps/looper/handlers.py did not finish importing within 5 s"
    agent.app_failed("/apps/looper", hung, "Timeout (0:00:05)!")
    agent.app_failed("/apps/looper", hung)  # the next run: the same error, not again
    assert agent.state.app_error == hung
    agent.app_failed("/apps/looper", "/apps/looper/handlers.py failed to import: E")
    agent.record(ev.IdentityLoaded, soul_sha256="s", identity_sha256="i", code_sha256="c")
    assert agent.state.app_error is None
    agent.app_failed("/apps/looper", hung)  # broken again after a good version
    events = agent.collect_events()
    failures = [e.error for e in events if isinstance(e, ev.AppLoadFailed)]
    assert failures == [hung, "/apps/looper/handlers.py failed to import: E", hung]
    rebuilt = replay(events)
    assert isinstance(rebuilt, Agent) and rebuilt.state == agent.state


def test_a_snapshot_stored_before_the_aggregates_moved_modules_still_loads() -> None:
    """Stored topics name the event class only (``AgentSnapshot``), never its module, so a
    snapshot written while the aggregates lived in ``events.aggregates`` decodes as is."""
    agent = Agent.blank(agent_stream_id("trader"))
    agent.record(ev.AgentRegistered, agent_id="trader")
    stored_state = msgspec.json.encode(AgentSnapshot.take(agent))
    stored = StoredEvent(
        originator_id=agent.id, originator_version=1, topic="AgentSnapshot", state=stored_state
    )
    assert topic_of(AgentSnapshot) == "AgentSnapshot"
    snapshot = MsgspecMapper().to_domain_event(stored)
    assert isinstance(snapshot, AgentSnapshot)
    restored = projector(Agent)(None, [snapshot])
    assert isinstance(restored, Agent) and restored.agent_id == "trader" and restored.version == 1
