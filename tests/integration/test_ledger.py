"""The ledger API against the real PostgreSQL: streams, snapshots, the global log, versions."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent

from events import Ledger, LedgerReadError, UnknownAgent, agent_stream_id
from events import catalog as ev
from events.aggregates import Agent, Run, projector
from events.catalog import LedgerEvent
from owlclaw.database import Database
from tests.integration.processes import contend_for_next_version

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger(fresh_db: Database) -> Iterator[Ledger]:
    with Ledger(fresh_db.url, snapshot_interval=10) as led:
        yield led


def run_once(ledger: Ledger, agent: Agent, focus: str) -> uuid.UUID:
    run = Run.start(
        agent.agent_id, agent.queue_run(trigger="webhook", focus=focus, payload={"n": 1})
    )
    run.record(ev.ToolCallRequested, call_id="c1", tool="remember", arguments={"content": focus})
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="remember", result={"ok": True})
    run.record(ev.RunCompleted, tool_calls=1)
    ledger.append(agent, run)
    return run.id


def test_register_is_idempotent_and_unknown_agents_are_reported(ledger: Ledger) -> None:
    first = ledger.register_agent("trader", app_dir="/apps/trader")
    again = ledger.register_agent("trader")
    assert first.id == again.id == agent_stream_id("trader")
    assert again.version == 1
    with pytest.raises(UnknownAgent, match="nobody"):
        ledger.load_agent("nobody")


def test_runs_are_listed_and_history_is_in_log_order(ledger: Ledger) -> None:
    agent = ledger.register_agent("trader")
    run_ids = [run_once(ledger, agent, f"focus {i}") for i in range(3)]
    assert ledger.list_runs("trader") == run_ids
    history = ledger.agent_history("trader")
    positions = [h.position for h in history]
    assert positions == sorted(positions) and len(history) == 1 + 3 * 5
    started = [h.event for h in history if isinstance(h.event, ev.RunStarted)]
    assert [e.focus for e in started] == ["focus 0", "focus 1", "focus 2"]
    assert ledger.load_run(run_ids[1]).state.status == "completed"


def test_one_append_is_one_transaction_with_consecutive_positions(ledger: Ledger) -> None:
    agent = ledger.register_agent("batch")
    run = Run.start(agent.agent_id, agent.queue_run(trigger="heartbeat"))
    for i in range(20):
        run.record(ev.DecisionLogged, decision_type="other", reasoning=str(i))
    positions = ledger.append(agent, run)
    assert positions == list(range(positions[0], positions[0] + 22))


def test_loading_uses_the_latest_snapshot_and_equals_a_full_replay(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("big")
    for i in range(57):
        agent.record(ev.IdentityLoaded, soul_sha256=str(i), identity_sha256="x")
        if i % 7 == 0:
            ledger.append(agent)
    ledger.append(agent)
    with psycopg.connect(fresh_db.url) as conn:
        versions = [
            r[0]
            for r in conn.execute(
                "SELECT originator_version FROM ledger_snapshots ORDER BY 1"
            ).fetchall()
        ]
    assert versions and max(versions) >= 50
    loaded = ledger.load_agent("big")
    replayed = projector(Agent)(None, ledger.stream(agent.id))
    assert replayed is not None
    assert loaded.version == replayed.version == 58
    assert loaded.state == replayed.state


def test_read_and_subscribe_follow_the_global_log(ledger: Ledger) -> None:
    agent = ledger.register_agent("follow")
    run_once(ledger, agent, "before")
    head = ledger.head()
    assert [e.position for e in ledger.read(0)] == list(range(1, head + 1))
    received: list[int] = []

    def follow() -> None:
        for logged in ledger.subscribe(after=head):
            received.append(logged.position)
            if len(received) == 5:
                return

    follower = threading.Thread(target=follow)
    follower.start()
    time.sleep(0.2)
    run_once(ledger, agent, "after")
    follower.join(timeout=10)
    assert received == list(range(head + 1, head + 6))


def test_two_processes_appending_the_same_version_exactly_one_commits(
    ledger: Ledger, fresh_db: Database
) -> None:
    ledger.register_agent("contested")
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(
            target=contend_for_next_version, args=(fresh_db.url, "contested", start, results)
        )
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join()
    assert [o[0] for o in outcomes] == ["committed", "conflict"]
    assert "another writer appended first" in outcomes[1][1]
    assert ledger.load_agent("contested").version == 2


class SampleV1Moved(LedgerEvent, frozen=True, kw_only=True):
    """Stands for an event class that moved to version 2 after rows were stored as v1."""

    stream: ClassVar[ev.Stream] = "agent"
    class_version: ClassVar[int] = 2
    note: str
    source: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["note"] = state.pop("message")
        state["source"] = "v1"


def test_a_v1_row_in_the_database_is_read_through_the_upcaster(ledger: Ledger) -> None:
    agent = ledger.register_agent("old")
    v1 = (
        b'{"originator_id":"%s","originator_version":2,'
        b'"timestamp":"2025-01-01T00:00:00Z","message":"stored long ago"}' % str(agent.id).encode()
    )
    ledger.recorder.insert_events([StoredEvent(agent.id, 2, "SampleV1Moved", v1)])
    event = ledger.stream(agent.id)[1]
    assert isinstance(event, SampleV1Moved)
    assert (event.note, event.source) == ("stored long ago", "v1")


def test_unknown_type_names_type_and_position_and_the_rest_stays_readable(
    ledger: Ledger,
) -> None:
    agent = ledger.register_agent("future")
    ledger.register_agent("neighbour")
    [pos] = ledger.recorder.insert_events([StoredEvent(agent.id, 2, "FromV9", b"{}")]) or [0]
    other = ledger.register_agent("after")
    run_once(ledger, other, "still fine")
    with pytest.raises(LedgerReadError) as info:
        ledger.read(0)
    assert "FromV9" in str(info.value) and f"log position {pos}" in str(info.value)
    assert info.value.position == pos
    assert len(ledger.read(pos)) == 1 + 5
    assert ledger.load_agent("neighbour").version == 1
    assert ledger.agent_history("after")[-1].event.originator_version == 4


def test_corrupt_payload_names_stream_and_version(ledger: Ledger, fresh_db: Database) -> None:
    agent = ledger.register_agent("corrupt")
    run_once(ledger, agent, "x")
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = '\\x7b7b'::bytea "
            "WHERE originator_id = %s AND originator_version = 2",
            (agent.id,),
        )
    with pytest.raises(LedgerReadError) as info:
        ledger.agent_history("corrupt")
    assert f"stream {agent.id} version 2" in str(info.value)
