"""The ledger contract on PostgreSQL, and what PostgreSQL does for the ledger: snapshots in
their table, appends from two processes, the hash chain computed in SQL."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from events import Ledger, LedgerReadError, LedgerUnavailable, UnknownAgent
from events import catalog as ev
from events.memory_recorder import InMemoryRecorder
from events.run import Run
from owlclaw.database import Database
from tests.integration.processes import contend_for_next_version
from tests.ledger_contract import LedgerContract, identity, run_once
from tests.postgres import DOCUMENTED_SQL

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger(fresh_db: Database) -> Iterator[Ledger]:
    with Ledger(fresh_db.url, snapshot_interval=10) as led:
        yield led


class TestPostgresLedger(LedgerContract):
    pass


def test_snapshots_are_stored_every_interval(ledger: Ledger, fresh_db: Database) -> None:
    agent = ledger.register_agent("big")
    for i in range(57):
        identity(agent, i)
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
    # one per multiple of 10 crossed, taken at the commit that crossed it
    assert versions == [16, 23, 30, 44, 51]


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


def test_a_row_altered_in_the_database_breaks_its_chain_there(
    ledger: Ledger, fresh_db: Database
) -> None:
    agent = ledger.register_agent("corrupt")
    run_id = run_once(ledger, agent, "x")
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = '\\x7b7b'::bytea "
            "WHERE originator_id = %s AND originator_version = 2",
            (run_id,),
        )
    [broken] = ledger.chains.verify().breaks
    assert (broken.stream, broken.version) == (run_id, 2)
    assert ledger.chains.verify([agent.id]).ok
    with pytest.raises(LedgerReadError, match=f"stream {run_id} version 2"):
        ledger.agent_history("corrupt")


def test_the_sql_and_the_in_memory_hash_chains_are_the_same(
    ledger: Ledger, fresh_db: Database
) -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    batches = [
        [StoredEvent(first, 1, "A", b"{}"), StoredEvent(first, 2, "B", b"\x00\xff")],
        [StoredEvent(second, 1, "A", b"x")],
        [StoredEvent(first, 3, "C", b"{}"), StoredEvent(second, 2, "D", "é".encode())],
        [StoredEvent(first, 4, "E", b"end")],
    ]
    memory = InMemoryRecorder()
    for batch in batches:
        ledger.database.recorder.insert_events(batch)
        memory.insert_events(batch)
    gap = [StoredEvent(first, 6, "F", b"gap")]  # both refuse a hole in a stream
    for recorder in (ledger.database.recorder, memory):
        with pytest.raises(IntegrityError, match="version 6 does not follow"):
            recorder.insert_events(gap)
    with psycopg.connect(fresh_db.url) as conn:
        stored = conn.execute(
            "SELECT originator_id, originator_version, prev_hash, hash FROM ledger_events"
            " ORDER BY originator_id, originator_version"
        ).fetchall()
    computed = [(r[0], r[1], r[5], r[6]) for r in memory.chain_rows()]
    assert [(s, v, bytes(p), bytes(h)) for s, v, p, h in stored] == computed


def test_nul_in_any_text_leaves_the_docs_sql_readable(fresh_db: Database) -> None:
    """NUL reaches events from outside the webhook (a tool's output, a model's arguments, a
    memory): it is stored as U+FFFD, so PostgreSQL's jsonb reads every event of the ledger
    (content in plaintext here, ``[ledger] encrypt = false``; sealed, the same inside)."""
    ledger = Ledger(fresh_db.url, encrypt=False)
    agent = ledger.register_agent("nul")
    run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="ok"))
    run.record(ev.ToolCallRequested, call_id="c1", tool="exec", arguments={"cmd\x00": "a\x00"})
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="exec", result={"out": "bin\x00ary"})
    run.record(ev.MemoryRemembered, agent_id="nul", memory_id=uuid.uuid4(), content="m\x00")
    run.record(ev.RunCompleted, tool_calls=1)
    ledger.append(agent, run)
    with psycopg.connect(fresh_db.url) as conn:
        rows = conn.execute(DOCUMENTED_SQL).fetchall()
    states = dict(rows)
    assert states["ToolCallRequested"]["arguments"] == {"cmd\ufffd": "a\ufffd"}
    assert states["ToolCallSucceeded"]["result"] == {"out": "bin\ufffdary"}
    assert states["MemoryRemembered"]["content"] == "m\ufffd"
    assert ledger.chains.verify().ok
    ledger.close()


def test_a_head_lookup_with_its_database_gone_is_ledger_unavailable(pg_server: Database) -> None:
    name = f"t_gone_{uuid.uuid4().hex[:8]}"
    with Ledger(pg_server.create_database(name).url) as ledger:
        ledger.register_agent("a")
        ledger.require_agent("a")
        with pytest.raises(UnknownAgent, match="nobody"):
            ledger.require_agent("nobody")
        pg_server.drop_database(name)  # WITH (FORCE): the ledger's connections are cut too
        with pytest.raises(LedgerUnavailable, match="cannot look up stream heads"):
            ledger.require_agent("a")


def test_what_the_ledger_tells_of_its_database(ledger: Ledger) -> None:
    """Counts by event type, commits per stream, the database's size, and a connection of its
    own woken by each append (what views, feeds and benches read instead of the pool)."""
    agent = ledger.register_agent("counted")
    run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="ok"))
    ledger.append(agent, run)
    run.record(ev.ToolCallRequested, call_id="c1", tool="exec", arguments={})
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="exec", result={})
    ledger.append(run)
    assert ledger.database.count_events([ev.RunStarted, ev.ToolCallRequested]) == 2
    assert ledger.database.count_events([ev.RunCompleted]) == 0
    assert ledger.database.stream_commits(run.id) == 2
    assert ledger.database.size() > 0
    with ledger.database.listen() as conn:
        identity(agent, 1)
        ledger.append(agent)
        assert [n.channel for n in conn.notifies(timeout=5, stop_after=1)] == [
            ledger.database.notify_channel
        ]
