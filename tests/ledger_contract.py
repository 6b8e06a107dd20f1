"""What every Ledger does, whatever stores it: one suite, subclassed per ledger.

``tests/unit/test_ledger.py`` runs it on ``Ledger.in_memory()``, ``tests/integration/
test_ledger.py`` on PostgreSQL (where the tests of PostgreSQL itself live too), the way
eventsourcing ships one suite for every recorder. A subclass provides the ``ledger`` fixture
(snapshot interval 10).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import Any, ClassVar

import pytest
from eventsourcing.persistence import StoredEvent

from events import (
    BlobCorrupted,
    Ledger,
    LedgerReadError,
    StreamConflict,
    UnknownAgent,
    UnknownBlob,
    agent_stream_id,
)
from events import catalog as ev
from events.agent import Agent
from events.aggregate import projector
from events.catalog import LedgerEvent
from events.hashchain import verify_rows
from events.run import Run


def run_once(ledger: Ledger, agent: Agent, focus: str) -> uuid.UUID:
    """Commit one finished run of five events (RunQueued on the agent, four on the run)."""
    run = Run.start(
        agent.agent_id, agent.queue_run(trigger="webhook", focus=focus, payload={"n": 1})
    )
    run.record(ev.ToolCallRequested, call_id="c1", tool="remember", arguments={"content": focus})
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="remember", result={"ok": True})
    run.record(ev.RunCompleted, tool_calls=1)
    ledger.append(agent, run)
    return run.id


def identity(agent: Agent, n: int) -> None:
    agent.record(ev.IdentityLoaded, soul_sha256=str(n), identity_sha256="x")


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


class LedgerContract:
    """The ledger API: streams, expected versions, snapshots, the global log, the hash chain,
    the blobs."""

    def test_register_is_idempotent_and_unknown_agents_are_reported(self, ledger: Ledger) -> None:
        first = ledger.register_agent("trader", app_dir="/apps/trader")
        again = ledger.register_agent("trader")
        assert first.id == again.id == agent_stream_id("trader")
        assert again.version == 1
        with pytest.raises(UnknownAgent, match="nobody"):
            ledger.load_agent("nobody")

    def test_runs_are_listed_and_history_is_in_log_order(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("trader")
        ledger.register_agent("neighbour")
        run_ids = [run_once(ledger, agent, f"focus {i}") for i in range(3)]
        assert ledger.list_runs("trader") == run_ids
        history = ledger.agent_history("trader")
        positions = [h.position for h in history]
        assert positions == sorted(positions) and len(history) == 1 + 3 * 5
        assert {h.event.originator_id for h in history} == {agent.id, *run_ids}
        started = [h.event for h in history if isinstance(h.event, ev.RunStarted)]
        assert [e.focus for e in started] == ["focus 0", "focus 1", "focus 2"]
        assert ledger.load_run(run_ids[1]).state.status == "completed"

    def test_history_pages_after_a_position(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("trader")
        ledger.register_agent("neighbour")  # its events lie between the trader's, never in them
        for i in range(2):
            run_once(ledger, agent, f"focus {i}")
            run_once(ledger, ledger.load_agent("neighbour"), "x")
        history = ledger.agent_history("trader")
        first = ledger.agent_history("trader", limit=4)
        rest = ledger.agent_history("trader", after=first[-1].position)
        assert first + rest == history and len(first) == 4
        assert ledger.agent_history("trader", after=history[-1].position) == []

    def test_one_append_is_one_transaction_with_consecutive_positions(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("batch")
        run = Run.start(agent.agent_id, agent.queue_run(trigger="heartbeat"))
        for i in range(20):
            run.record(ev.DecisionLogged, decision_type="other", reasoning=str(i))
        positions = ledger.append(agent, run)
        assert positions == list(range(positions[0], positions[0] + 22))
        assert ledger.log.head() == positions[-1]

    def test_a_writer_whose_append_failed_cannot_append_past_the_lost_versions(
        self, ledger: Ledger
    ) -> None:
        agent = ledger.register_agent("gap")
        run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook"))
        ledger.append(agent, run)
        run.record(ev.RunWarning, source="test", message="collected by an append that failed")
        run.collect_events()
        run.record(ev.RunCompleted, tool_calls=0)
        head = ledger.log.head()
        with pytest.raises(StreamConflict, match="does not follow its last stored version 1"):
            ledger.append(run)
        assert ledger.log.head() == head
        assert [e.originator_version for e in ledger.stream(run.id)] == [1]

    def test_a_stale_writer_gets_stream_conflict_and_nothing_of_it_is_stored(
        self, ledger: Ledger
    ) -> None:
        ledger.register_agent("contested")
        first, second = ledger.load_agent("contested"), ledger.load_agent("contested")
        identity(first, 1)
        ledger.append(first)
        identity(second, 2)
        run = Run.start(second.agent_id, second.queue_run(trigger="webhook"))
        head = ledger.log.head()
        with pytest.raises(StreamConflict, match="another writer appended first"):
            ledger.append(second, run)
        assert ledger.log.head() == head
        assert ledger.stream(run.id) == []
        loaded = ledger.load_agent("contested")
        assert loaded.version == 2 and loaded.state.run_count == 0

    def test_append_rebasing_re_records_over_commuting_events_only(self, ledger: Ledger) -> None:
        ledger.register_agent("rebased", app_dir="/a")
        mine, other = ledger.load_agent("rebased"), ledger.load_agent("rebased")
        other.record(ev.AppAttached, app_dir="/b", previous="/a")
        ledger.append(other)
        identity(mine, 1)
        stale = ledger.load_agent("rebased")
        agent, positions = ledger.append_rebasing(mine, over=(ev.AppAttached,))
        assert agent.version == 3 and len(positions) == 1
        assert [type(e) for e in ledger.stream(agent.id)] == [
            ev.AgentRegistered,
            ev.AppAttached,
            ev.IdentityLoaded,
        ]
        identity(stale, 2)  # stale by the IdentityLoaded above, which does not commute
        with pytest.raises(StreamConflict):
            ledger.append_rebasing(stale, over=(ev.AppAttached,))
        assert ledger.load_agent("rebased").version == 3

    def test_append_rebasing_re_records_over_the_writers_own_commits(self, ledger: Ledger) -> None:
        ledger.register_agent("own", app_dir="/a")
        running, stranger, accepting = (ledger.load_agent("own") for _ in range(3))
        accepting.queue_run("webhook")  # the same writer accepts a run meanwhile
        ledger.append(accepting)
        identity(stranger, 1)
        with pytest.raises(StreamConflict):  # not its own: another writer queued that run
            ledger.append_rebasing(stranger, over=(ev.AppAttached,))
        identity(running, 1)
        agent, _ = ledger.append_rebasing(running, over=(ev.AppAttached,), ours={2})
        assert agent.version == 3 and agent.state.run_count == 1
        assert [type(e) for e in ledger.stream(agent.id)][1:] == [ev.RunQueued, ev.IdentityLoaded]

    def test_a_run_queued_by_another_writer_during_a_rebase_is_a_conflict(
        self, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two hosts for one agent: a run accepted behind the writer's own commit is rebased,
        and another host queues a run between the conflict and the reload. Re-recording over
        that run would give two runs one number (this race forked a stream under load)."""
        ledger.register_agent("raced", app_dir="/a")
        own, accepting = ledger.load_agent("raced"), ledger.load_agent("raced")
        identity(own, 1)
        ledger.append(own)  # the writer's own commit (version 2): its run accepted after it
        accepting.queue_run("webhook")  # as of version 1: run 1, to go on top of version 2
        load_agent = ledger.load_agent

        def another_host_queues_first(agent_id: str) -> Agent:
            stranger = load_agent(agent_id)
            if stranger.state.run_count == 0:
                stranger.queue_run("webhook")
                ledger.append(stranger)
            return load_agent(agent_id)

        monkeypatch.setattr(ledger, "load_agent", another_host_queues_first)
        with pytest.raises(StreamConflict, match="another writer"):
            ledger.append_rebasing(accepting, over=(ev.AppAttached,), ours={2})
        queued = [e for e in ledger.stream(own.id) if isinstance(e, ev.RunQueued)]
        assert [q.run_no for q in queued] == [1]

    def test_a_rebased_run_keeps_its_number_only_while_it_is_the_next(self, ledger: Ledger) -> None:
        ledger.register_agent("numbered")
        first, second = ledger.load_agent("numbered"), ledger.load_agent("numbered")
        queued = first.queue_run("webhook")
        second.queue_run("webhook")
        ledger.append(second)
        with pytest.raises(StreamConflict, match="run 1 was queued by another writer"):
            ledger.load_agent("numbered").record_again(queued)
        following = ledger.load_agent("numbered").queue_run("webhook")  # run 2, not committed
        again = ledger.load_agent("numbered").record_again(following)
        assert isinstance(again, ev.RunQueued)
        assert (again.run_no, again.run_id) == (2, following.run_id)

    def test_loading_equals_a_full_replay_across_snapshots(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("big")
        for i in range(57):
            identity(agent, i)
            if i % 7 == 0:
                ledger.append(agent)
        ledger.append(agent)
        loaded = ledger.load_agent("big")
        replayed = projector(Agent)(None, ledger.stream(agent.id))
        assert replayed is not None
        assert loaded.version == replayed.version == 58
        assert loaded.state == replayed.state

    def test_read_filters_by_type_and_bounds(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("reader")
        run_once(ledger, agent, "one")
        run_once(ledger, agent, "two")
        head = ledger.log.head()
        assert [e.position for e in ledger.log.read(0)] == list(range(1, head + 1))
        assert [e.position for e in ledger.log.read(2, limit=3)] == [3, 4, 5]
        assert [e.position for e in ledger.log.read(0, up_to=4)] == [1, 2, 3, 4]
        completed = ledger.log.read(0, types=[ev.RunCompleted, ev.RunStarted])
        assert [type(e.event) for e in completed] == [ev.RunStarted, ev.RunCompleted] * 2
        assert not ledger.log.is_held_back(0)

    def test_subscribe_follows_the_global_log(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("follow")
        run_once(ledger, agent, "before")
        head = ledger.log.head()
        received: list[int] = []

        def follow() -> None:
            for logged in ledger.log.subscribe(after=head):
                received.append(logged.position)
                if len(received) == 5:
                    return

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        run_once(ledger, agent, "after")
        follower.join(timeout=10)
        assert received == list(range(head + 1, head + 6))

    def test_an_interrupted_run_and_unstarted_runs_are_found(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("crashy")
        run_once(ledger, agent, "done")
        assert (
            ledger.resumable.interrupted_run(agent) is None
            and ledger.resumable.unstarted_runs(agent) == []
        )
        open_run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook", focus="cut off"))
        ledger.append(agent, open_run)
        assert ledger.resumable.interrupted_run(agent) == open_run.id
        open_run.record(ev.RunFailed, error="crashed")
        ledger.append(open_run)
        waiting = [agent.queue_run("webhook", focus=f"later {i}") for i in range(2)]
        ledger.append(agent)
        assert ledger.resumable.interrupted_run(agent) is None
        assert ledger.resumable.unstarted_runs(agent) == waiting

    def test_the_hash_chain_of_every_stream_verifies(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("chained")
        run_ids = [run_once(ledger, agent, f"focus {i}") for i in range(2)]
        ledger.register_agent("other")
        report = ledger.chains.verify()
        assert report.ok and (report.streams, report.events) == (4, ledger.log.head())
        one = ledger.chains.verify([agent.id, run_ids[0]])
        assert one.ok and (one.streams, one.events) == (2, 3 + 4)

    def test_stream_heads_are_each_streams_last_event_and_its_hash(self, ledger: Ledger) -> None:
        long = ledger.register_agent("long")
        for i in range(120):  # past snapshots, over several commits
            identity(long, i)
            if i % 25 == 0:
                ledger.append(long)
        ledger.append(long)
        short = ledger.register_agent("short")
        missing = uuid.uuid4()
        rows = {(r[0], r[1]): r[6] for r in ledger.chains.chain_rows([long.id, short.id])}
        expected = {long.id: (121, rows[(long.id, 121)]), short.id: (1, rows[(short.id, 1)])}
        assert ledger.chains.stream_heads([long.id, short.id, missing, long.id]) == expected
        assert {s: h for s, h in ledger.chains.stream_heads().items() if s in expected} == expected

        found: list[tuple[uuid.UUID, tuple[int, bytes] | None]] = []
        start = threading.Barrier(6)

        def look(stream: uuid.UUID) -> None:  # concurrent lookups share queries
            start.wait()
            found.append((stream, ledger.chains.stream_head(stream)))

        streams = [long.id, short.id, missing] * 2
        threads = [threading.Thread(target=look, args=(s,)) for s in streams]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(found, key=str) == sorted([(s, expected.get(s)) for s in streams], key=str)

    def test_chain_rows_are_the_given_streams_in_that_order(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("exported")
        run_ids = [run_once(ledger, agent, f"focus {i}") for i in range(2)]
        rows = list(ledger.chains.chain_rows([run_ids[1], agent.id]))
        versions = [(s, len(ledger.stream(s))) for s in (run_ids[1], agent.id)]
        assert [(r[0], r[1]) for r in rows] == [
            (s, v) for s, n in versions for v in range(1, n + 1)
        ]
        assert verify_rows(rows).ok and verify_rows(rows).streams == 2

    def test_a_v1_row_is_read_through_the_upcaster(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("old")
        v1 = (
            b'{"originator_id":"%s","originator_version":2,'
            b'"timestamp":"2025-01-01T00:00:00Z","message":"stored long ago"}'
            % str(agent.id).encode()
        )
        ledger.database.recorder.insert_events([StoredEvent(agent.id, 2, "SampleV1Moved", v1)])
        event = ledger.stream(agent.id)[1]
        assert isinstance(event, SampleV1Moved)
        assert (event.note, event.source) == ("stored long ago", "v1")

    def test_unknown_type_names_type_and_position_and_the_rest_stays_readable(
        self, ledger: Ledger
    ) -> None:
        agent = ledger.register_agent("future")
        ledger.register_agent("neighbour")
        [pos] = ledger.database.recorder.insert_events(
            [StoredEvent(agent.id, 2, "FromV9", b"{}")]
        ) or [0]
        other = ledger.register_agent("after")
        run_once(ledger, other, "still fine")
        with pytest.raises(LedgerReadError) as info:
            ledger.log.read(0)
        assert "FromV9" in str(info.value) and f"log position {pos}" in str(info.value)
        assert info.value.position == pos
        assert len(ledger.log.read(pos)) == 1 + 5
        assert ledger.load_agent("neighbour").version == 1
        assert ledger.agent_history("after")[-1].event.originator_version == 4

    def test_an_undecodable_payload_names_stream_and_version(self, ledger: Ledger) -> None:
        agent = ledger.register_agent("corrupt")
        run_id = run_once(ledger, agent, "x")
        ledger.database.recorder.insert_events([StoredEvent(run_id, 5, "RunCompleted", b"{{")])
        with pytest.raises(LedgerReadError) as info:
            ledger.agent_history("corrupt")
        assert f"stream {run_id} version 5" in str(info.value)

    def test_a_blob_is_stored_once_under_its_sha256_and_read_back(self, ledger: Ledger) -> None:
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
        sha256 = ledger.blobs.put(png, "image/png")
        assert sha256 == hashlib.sha256(png).hexdigest()
        assert ledger.blobs.put(png, "application/octet-stream") == sha256
        assert ledger.blobs.get(sha256) == ("image/png", png)
        assert ledger.blobs.get(ledger.blobs.put(b"", "text/plain")) == ("text/plain", b"")

    def test_an_unknown_or_malformed_blob_key_is_refused(self, ledger: Ledger) -> None:
        missing = hashlib.sha256(b"never stored").hexdigest()
        with pytest.raises(UnknownBlob, match=f"no blob {missing}"):
            ledger.blobs.get(missing)
        with pytest.raises(UnknownBlob, match="not a sha256"):
            ledger.blobs.get(missing.upper())

    def test_a_blob_whose_bytes_no_longer_hash_to_its_key_is_refused(self, ledger: Ledger) -> None:
        forged = hashlib.sha256(b"what was recorded").hexdigest()
        ledger.database.recorder.insert_blob(forged, "image/png", b"something else")
        with pytest.raises(BlobCorrupted, match=f"blob {forged}"):
            ledger.blobs.get(forged)
