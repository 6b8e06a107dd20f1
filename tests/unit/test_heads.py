"""Committed stream heads: runs sealed at their end with the hash the ledger stores, anchors,
and the checks that name a stream no longer matching them (pure, and on the in-memory ledger)."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from events import Ledger, StreamConflict
from events import catalog as ev
from events.heads import (
    Anchor,
    AnchorInvalid,
    anchor_digest,
    anchored_heads,
    check_anchor,
    check_seals,
    read_anchor,
)
from events.run import Run
from events.streams import now
from owlclaw.audit.chains import verify_agent
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.fencing import AgentWriter
from tests.scripted import decide, play

AGENT_STREAM = uuid.uuid4()
RUNS = [uuid.uuid4() for _ in range(4)]
H = [bytes([i]) * 32 for i in range(8)]


def queued(version: int, run_no: int) -> ev.RunQueued:
    return ev.RunQueued(
        originator_id=AGENT_STREAM,
        originator_version=version,
        timestamp=now(),
        run_id=RUNS[run_no - 1],
        run_no=run_no,
        trigger="webhook",
    )


def sealed(version: int, run_no: int, run_version: int, hash_: bytes) -> ev.RunSealed:
    return ev.RunSealed(
        originator_id=AGENT_STREAM,
        originator_version=version,
        timestamp=now(),
        run_id=RUNS[run_no - 1],
        run_no=run_no,
        version=run_version,
        hash=hash_.hex(),
    )


def test_runs_matching_their_seals_and_queued_runs_not_started_yet_are_fine() -> None:
    stream = [queued(1, 1), sealed(2, 1, 5, H[1]), queued(3, 2), queued(4, 3)]
    heads = {RUNS[0]: (5, H[1]), RUNS[1]: (2, H[2])}  # run 2 still running, run 3 waits
    assert check_seals("a", stream, heads, {(RUNS[0], 5): H[1]}) == ([], 1)


def test_each_way_a_run_stream_differs_from_its_seal_is_named() -> None:
    stream = [queued(1, 1), queued(2, 2), queued(3, 3), queued(4, 4)]
    stream += [sealed(5, 1, 5, H[1]), sealed(6, 2, 5, H[2]), sealed(7, 3, 5, H[3])]
    heads = {RUNS[0]: (4, H[0]), RUNS[2]: (6, H[6]), RUNS[3]: (5, H[5])}
    hashes = {(RUNS[2], 5): H[3]}
    found, checked = check_seals("a", stream, heads, hashes)
    assert checked == 3
    assert [(m.label, m.expected_version, m.found_version, m.reason) for m in found] == [
        ("agent a run 1", 5, 4, "the stream ends 1 event(s) short: its tail was deleted"),
        ("agent a run 2", 5, None, "the stream is missing (deleted)"),
        ("agent a run 3", 5, 6, "1 event(s) were appended after the run's end"),
    ]
    assert found[0].by == "RunSealed at agent version 5"


def test_a_rewritten_end_and_an_unsealed_run_missing_before_a_started_one_are_named() -> None:
    stream = [queued(1, 1), sealed(2, 1, 5, H[1]), queued(3, 2), queued(4, 3)]
    heads = {RUNS[0]: (5, H[7]), RUNS[2]: (1, H[2])}  # run 2 gone though run 3 started
    found, _ = check_seals("a", stream, heads, {(RUNS[0], 5): H[7]})
    assert [(m.label, m.found_hash, m.reason) for m in found] == [
        (
            "agent a run 1",
            H[7].hex(),
            "the event at version 5 is not the one committed: it was rewritten "
            "(with its hashes recomputed)",
        ),
        ("agent a run 2", None, "the run's stream is missing (deleted)"),
    ]
    assert str(found[1]) == (
        f"agent a run 2 (stream {RUNS[1]}): the run's stream is missing (deleted); expected "
        "version 1 (RunQueued, and run 3 started after it), found no stream"
    )


def test_an_anchor_names_shorter_and_rewritten_streams_not_grown_or_new_ones() -> None:
    anchored = anchored_heads({RUNS[0]: (3, H[0]), RUNS[1]: (4, H[1]), RUNS[2]: (2, H[2])})
    heads = {RUNS[0]: (9, H[5]), RUNS[1]: (3, H[3]), RUNS[2]: (2, H[4]), RUNS[3]: (1, H[6])}
    hashes = {(RUNS[0], 3): H[0], (RUNS[2], 2): H[4]}
    found = check_anchor(anchored, heads, hashes, {RUNS[1]: "agent a run 2"}, "anchor 1")
    assert sorted((m.label, m.reason) for m in found) == [
        ("agent a run 2", "the stream ends 1 event(s) short: its tail was deleted"),
        (
            f"stream {RUNS[2]}",
            "the event at version 2 is not the one committed: it was rewritten "
            "(with its hashes recomputed)",
        ),
    ]


def test_an_anchor_file_is_checked_before_it_is_trusted() -> None:
    heads = anchored_heads({RUNS[0]: (3, H[0]), RUNS[1]: (4, H[1])})
    anchor = Anchor(anchor=2, at=now(), digest=anchor_digest(heads), heads=heads)
    assert read_anchor(msgspec.json.encode(anchor), "kept.json") == anchor
    with pytest.raises(AnchorInvalid, match=r"kept\.json is not an anchor printed by"):
        read_anchor(b'{"heads": []}', "kept.json")
    edited = msgspec.structs.replace(anchor, heads=heads[:1])
    with pytest.raises(AnchorInvalid, match=r"kept\.json: its digest .* the file was altered"):
        read_anchor(msgspec.json.encode(edited), "kept.json")


def test_a_run_is_sealed_with_the_head_the_ledger_stores(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "trader", models=["scripted/none"])
    try:
        result = play(runtime, [decide(1), {"content": "done"}])
    finally:
        runtime.close()
    run_id = uuid.UUID(result.run_id)
    [seal] = [
        e for e in ledger.stream(ledger.load_agent("trader").id) if isinstance(e, ev.RunSealed)
    ]
    version, hash_ = ledger.chains.stream_heads([run_id])[run_id]
    assert (seal.run_id, seal.run_no, seal.version, seal.hash) == (run_id, 1, version, hash_.hex())
    report = verify_agent(ledger, "trader")
    assert report.ok and report.sealed_runs == 1


def test_a_run_this_process_committed_is_sealed_without_reading_its_hash_back(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger chains what it commits of a run (``Run.head``), so the seal at the run's end
    needs no read; a run loaded from the ledger does not know its head and reads it back."""
    agent = ledger.register_agent("sealer")
    run = Run.start("sealer", agent.queue_run("webhook"))
    ledger.append(agent, run)
    run.record(ev.DecisionLogged, decision_type="other", reasoning="first commit of its own")
    ledger.append(run)
    assert run.head == ledger.chains.stream_heads([run.id])[run.id]

    def no_read(keys: object) -> None:
        raise AssertionError(f"the seal read hashes back: {keys}")

    monkeypatch.setattr(ledger.database.recorder, "event_hashes", no_read)
    run.end(ev.RunCompleted, answer="done")
    agent, _ = AgentWriter(ledger).append(agent, run)
    monkeypatch.undo()
    [seal] = [e for e in ledger.stream(agent.id) if isinstance(e, ev.RunSealed)]
    assert (seal.version, seal.hash) == (3, ledger.chains.stream_heads([run.id])[run.id][1].hex())
    assert verify_agent(ledger, "sealer").ok

    queued = agent.queue_run("webhook")
    second = Run.start("sealer", queued)
    ledger.append(agent, second)
    loaded = ledger.load_run(second.id)
    assert loaded.head is None
    loaded.end(ev.RunFailed, error="resumed elsewhere")
    agent, _ = AgentWriter(ledger).append(ledger.load_agent("sealer"), loaded)
    report = verify_agent(ledger, "sealer")
    assert report.ok and report.sealed_runs == 2


def test_a_seal_commutes_with_what_another_writer_appended_meanwhile(ledger: Ledger) -> None:
    """A writer fenced off the agent (another host queued a run) still ends and seals the run
    it was running, on top of the other writer's events."""
    agent = ledger.register_agent("fenced")
    run = Run.start("fenced", agent.queue_run("webhook"))
    ledger.append(agent, run)
    other = ledger.load_agent("fenced")
    other.queue_run("webhook", focus="from another host")
    ledger.append(other)
    run.end(ev.RunFailed, error="another host took over")
    agent, _ = AgentWriter(ledger).append(agent, run)
    assert [type(e) for e in ledger.stream(agent.id)][-2:] == [ev.RunQueued, ev.RunSealed]
    assert verify_agent(ledger, "fenced").ok
    late = ledger.load_agent("fenced")
    late.record(ev.AgentWarning, source="test", message="a fact that does not commute")
    newer = ledger.load_agent("fenced")
    newer.queue_run("webhook")
    ledger.append(newer)
    with pytest.raises(StreamConflict):
        ledger.append_rebasing(late, over=())


def test_anchors_are_recorded_in_turn_and_the_latest_is_read_back(ledger: Ledger) -> None:
    assert ledger.chains.latest_anchor() is None
    agent = ledger.register_agent("a")
    first = ledger.chains.anchor()
    assert [(h.stream, h.version) for h in first.heads] == [(agent.id, 1)]
    ledger.register_agent("b")
    second = ledger.chains.anchor()
    assert (second.anchor, len(second.heads)) == (2, 2)
    assert ledger.chains.latest_anchor() == second
    assert second.digest == anchor_digest(second.heads)
