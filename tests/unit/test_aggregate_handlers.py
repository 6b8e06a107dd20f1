"""Aggregates apply events through an explicit map from event class to handler, checked when the
aggregate is defined: every catalog event of its stream is handled or ignored, nothing else."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import uuid4

import msgspec
import pytest

from events import catalog as ev
from events.agent import Agent
from events.agent_state import PREVIOUS_APP_KEPT
from events.aggregate import stream_events
from events.catalog import LedgerEvent
from events.run import Run
from events.streams import agent_stream_id, run_stream_id

AT = datetime(2026, 1, 1, tzinfo=UTC)
RUN_ID, CHILD_RUN_ID, MEMORY, OTHER_MEMORY = uuid4(), uuid4(), uuid4(), uuid4()
SPAWN = {
    "spawn_id": "sp1",
    "run_id": RUN_ID,
    "call_id": "c9",
    "child_agent_id": "child",
    "child_run_id": CHILD_RUN_ID,
    "wait": True,
}


def _approval(approval_id: str) -> tuple[type[LedgerEvent], dict[str, Any]]:
    fields = {
        "approval_id": approval_id,
        "agent_id": "a",
        "run_id": RUN_ID,
        "call_id": approval_id,
        "tool": "pay",
        "arguments": {},
        "reason": "ask",
        "approvers": [],
        "expires_at": AT,
    }
    return ev.ApprovalRequested, fields


MESSAGE = {"message_id": "m1", "run_id": RUN_ID, "call_id": "c1"}
SENT = {"hops": 1, "request_version": 3, "request_hash": "ab", "expect_reply": True}
AGENT_STORY: list[tuple[type[LedgerEvent], dict[str, Any]]] = [
    (ev.AgentRegistered, {"agent_id": "a"}),
    (ev.AppAttached, {"app_dir": "/apps/a"}),
    (ev.IdentityLoaded, {"soul_sha256": "s", "identity_sha256": "i"}),
    (ev.AgentWarning, {"source": PREVIOUS_APP_KEPT, "message": "handlers.py raised\nat line 3"}),
    (ev.AppLoadFailed, {"app_dir": "/apps/a", "error": "handlers.py raised"}),
    (ev.RunQueued, {"run_id": RUN_ID, "run_no": 1, "trigger": "webhook"}),
    (ev.InboundReceived, {"source": "webhook"}),
    (
        ev.ScheduleRequested,
        {"schedule_id": "s1", "kind": "cron", "focus": "f", "cron": "0 * * * *"},
    ),
    (ev.ScheduleRegistered, {"schedule_id": "s1", "backend": "builtin", "backend_id": "b1"}),
    (ev.TimerFired, {"schedule_id": "s1", "fire_time": AT}),
    (ev.ScheduleCancelled, {"schedule_id": "s1"}),
    (ev.ScheduleRequested, {"schedule_id": "s2", "kind": "once", "focus": "f", "fire_at": AT}),
    (ev.TimerMissed, {"schedule_id": "s2", "fire_time": AT, "reason": "skipped"}),
    (ev.SubAgentSpawned, {**SPAWN, "task": "t"}),
    (ev.SubAgentFinished, {**SPAWN, "status": "completed", "answer": "done"}),
    (ev.AgentMessageSent, {**MESSAGE, **SENT, "to_agent_id": "b", "text": "hi"}),
    (ev.AgentReplyReceived, {**MESSAGE, "from_agent_id": "b", "status": "completed"}),
    (ev.ToolsChanged, {"disabled": ["pay"]}),
    (ev.MemoryAdded, {"memory_id": MEMORY, "run_id": RUN_ID}),
    (ev.MemoryArchived, {"memory_ids": [MEMORY], "reason": "limit"}),
    (ev.MemoryAdded, {"memory_id": OTHER_MEMORY, "run_id": RUN_ID}),
    (ev.MemoryForgotten, {"memory_id": OTHER_MEMORY, "run_id": RUN_ID}),
    _approval("p1"),
    (ev.ApprovalGranted, {"approval_id": "p1", "by": "alice"}),
    _approval("p2"),
    (ev.ApprovalDenied, {"approval_id": "p2", "by": "alice"}),
    _approval("p3"),
    (ev.ApprovalExpired, {"approval_id": "p3"}),
    (ev.BudgetExceeded, {"run_id": None, "budget": "daily", "limit": 1.0, "spent": 2.0}),
]
"""A sequence of agent events in which each one changes the state (after the ones before)."""

RUN_STORY: list[tuple[type[LedgerEvent], dict[str, Any]]] = [
    (ev.RunStarted, {"agent_id": "a", "run_no": 1, "trigger": "webhook"}),
    (ev.LLMResponded, {"model": "m", "message": {}, "usage": {"total_tokens": 7}}),
    *[
        step
        for n, outcome, fields in [
            (1, ev.ToolCallSucceeded, {"result": None}),
            (2, ev.ToolCallFailed, {"error": "e", "error_code": "E"}),
            (3, ev.ToolCallTimedOut, {"timeout_s": 1.0}),
            (4, ev.ToolOutcomeUnknown, {"reason": "crash"}),
        ]
        for step in [
            (ev.ToolCallRequested, {"call_id": f"c{n}", "tool": "t", "arguments": {}}),
            (outcome, {"call_id": f"c{n}", "tool": "t", **fields}),
        ]
    ],
    (ev.ToolCallDenied, {"call_id": "c5", "tool": "t", "reason": "deny"}),
    (ev.ToolCallRejected, {"call_id": "c6", "tool": "t", "error": "bad arguments"}),
    (ev.PlanUpdated, {"items": [{"text": "step", "status": "pending"}]}),
    (ev.RunParked, {"call_id": "c7"}),
    (
        ev.SubAgentCharged,
        {"spawn_id": "sp1", "child_agent_id": "child", "tokens": 3, "cost_usd": 0.1},
    ),
    (ev.RunInterrupted, {"reason": "crash"}),
    (ev.RunResumed, {"from_version": 3}),
    (ev.RunCompleted, {"answer": "ok"}),
    (ev.RunFailed, {"error": "e"}),
    (ev.RunTimedOut, {"timeout_s": 1.0}),
    (ev.RunTerminated, {"reason": "stop"}),
    (ev.RunSkipped, {"reason": "idle"}),
]
"""The same for a run; the end events follow each other only to show each one's change."""

IGNORED_SAMPLES: list[tuple[type[LedgerEvent], dict[str, Any]]] = [
    (ev.TimerDeduplicated, {"schedule_id": "s1", "fire_time": AT, "reason": "already fired"}),
    (ev.RunSealed, {"run_id": RUN_ID, "run_no": 1, "version": 5, "hash": "00"}),
    (
        ev.ArchiveSealed,
        {
            "file": "a/2026-01.1.jsonl.gz",
            "sha256": "00",
            "period": "2026-01",
            "runs": [ev.ArchivedRun(run_id=RUN_ID, run_no=1, version=5, hash="00")],
            "root": "00",
            "first_position": 1,
            "last_position": 5,
        },
    ),
    (
        ev.DataErased,
        {"kind": "run", "target": str(RUN_ID), "keys": [MEMORY], "reason": "r", "by": "op"},
    ),
    (
        ev.MemoryExpired,
        {"memory_ids": [MEMORY], "reason": "archived", "age_days": 365, "keys": [MEMORY]},
    ),
    (ev.VisibleToolsResolved, {"tools": ["t"]}),
    (ev.DecisionLogged, {"decision_type": "other", "reasoning": "why"}),
    (ev.RunWarning, {"source": "recall", "message": "lagging"}),
    (ev.MemoryRemembered, {"agent_id": "a", "memory_id": MEMORY, "content": "c"}),
    (
        ev.MessageSent,
        {
            "message_id": "m1",
            "agent_id": "a",
            "run_id": RUN_ID,
            "channel": "slack",
            "kind": "webhook",
            "url": "http://x",
            "text": "hi",
        },
    ),
]


def _blank(cls: type[Agent] | type[Run]) -> Agent | Run:
    return Agent.blank(agent_stream_id("a")) if cls is Agent else Run.blank(run_stream_id("a", 1))


def _state(aggregate: Agent | Run) -> Any:
    return msgspec.to_builtins(aggregate.state)


@pytest.mark.parametrize(("cls", "story"), [(Agent, AGENT_STORY), (Run, RUN_STORY)])
def test_every_handled_event_changes_state_through_its_handler(
    cls: type[Agent] | type[Run], story: list[tuple[type[LedgerEvent], dict[str, Any]]]
) -> None:
    assert {event for event, _ in story} == set(cls.handlers)
    called: list[type[LedgerEvent]] = []

    def spy(handler: Any) -> Any:
        def spied(aggregate: Any, event: LedgerEvent) -> None:
            called.append(type(event))
            handler(aggregate, event)

        return spied

    class Spied(cls):
        handlers = {event: spy(handler) for event, handler in cls.handlers.items()}

    aggregate = _blank(cls)
    spied = Spied(aggregate.id, aggregate.state)
    for event, fields in story:
        before = _state(spied)
        spied.record(event, **fields)
        assert _state(spied) != before, f"{event.__name__} changed nothing"
        assert called[-1] is event


@pytest.mark.parametrize(("event", "fields"), IGNORED_SAMPLES)
def test_an_ignored_event_only_advances_the_version(
    event: type[LedgerEvent], fields: dict[str, Any]
) -> None:
    aggregate = _blank(Agent if event.stream == "agent" else Run)
    before = _state(aggregate)
    aggregate.record(event, **fields)
    assert _state(aggregate) == before and aggregate.version == 1


def test_handled_and_ignored_events_are_exactly_the_catalog_events_of_each_stream() -> None:
    for cls in (Agent, Run):
        assert set(cls.handlers) | cls.ignored == stream_events(cls.stream)
    assert {event for event, _ in IGNORED_SAMPLES} == Agent.ignored | Run.ignored


def test_a_handler_map_missing_an_event_fails_when_the_aggregate_is_defined() -> None:
    with pytest.raises(TypeError, match="MissingParked has no handler for RunParked of its run"):

        class MissingParked(Run):
            handlers = {e: h for e, h in Run.handlers.items() if e is not ev.RunParked}


def test_a_handler_for_something_not_a_catalog_event_fails_when_the_aggregate_is_defined() -> None:
    class NotAnEvent(msgspec.Struct):
        pass

    with pytest.raises(TypeError, match=r"NotAnEvent.*not an event of events\.catalog"):

        class Wrong(Run):
            handlers = {**Run.handlers, NotAnEvent: Run.handlers[ev.RunParked]}


def test_a_handler_for_another_streams_event_fails_when_the_aggregate_is_defined() -> None:
    with pytest.raises(TypeError, match="maps RunQueued, an event of the agent stream"):

        class Crossed(Run):
            handlers = {**Run.handlers, ev.RunQueued: Run.handlers[ev.RunParked]}


def test_an_event_both_handled_and_ignored_fails_when_the_aggregate_is_defined() -> None:
    with pytest.raises(TypeError, match="both handles and ignores RunWarning"):

        class Both(Run):
            handlers = {**Run.handlers, ev.RunWarning: Run.handlers[ev.RunParked]}


def test_an_event_outside_the_map_is_refused_not_silently_dropped() -> None:
    class _Uncatalogued(LedgerEvent, frozen=True, kw_only=True):
        stream: ClassVar[ev.Stream] = "run"

    run = Run.blank(run_stream_id("a", 1))
    with pytest.raises(TypeError, match="Run does not apply _Uncatalogued"):
        run.apply(_Uncatalogued(originator_id=run.id, originator_version=1, timestamp=AT))
    assert run.version == 0
