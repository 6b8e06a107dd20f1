"""Deletion is tampering too: on the real ledger, a deleted run tail, a deleted run stream, a
deleted agent-stream tail after an anchor and an event rewritten with its chain recomputed after
an anchor are each named by verify; an untouched ledger (with a parked and resumed run, and an
interrupted one resumed) reports nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from events import Ledger
from events import catalog as ev
from events.hashchain import HeadMismatch, row_hash
from events.heads import ANCHOR_STREAM_ID
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.audit.chains import verify_agent
from owlclaw.cli import app as cli
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Decision
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.approvals import answer_directly
from tests.approvals import digest_of, park, resumed, trader
from tests.scripted import decide, play

pytestmark = pytest.mark.integration

AGENT = "sealed"


def history(ledger: Ledger) -> list[uuid.UUID]:
    """Three ended runs of AGENT (the second interrupted mid-run and resumed); their ids."""
    runtime = AgentRuntime(ledger, AGENT, models=["scripted/none"])
    try:
        first = play(runtime, [decide(1), {"content": "done"}])
        agent = ledger.load_agent(AGENT)
        cut = Run.start(AGENT, agent.queue_run("webhook", focus="cut off"))
        cut.record(
            ev.LLMResponded, model="scripted/x", message={"role": "assistant", "content": "?"}
        )
        ledger.append(agent, cut)
        register_script("after-the-crash", [{"content": "resumed"}])
        runtime.models = ["scripted/after-the-crash"]
        assert asyncio.run(runtime.resume(cut.id)).status == "completed"
        third = play(runtime, [{"content": "three"}])
    finally:
        runtime.close()
    return [uuid.UUID(first.run_id), cut.id, uuid.UUID(third.run_id)]


def sql(db: Database, statement: str, *params: object) -> None:
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(statement, params)


def delete_last(db: Database, stream: uuid.UUID) -> None:
    sql(
        db,
        "DELETE FROM ledger_events WHERE originator_id = %s AND originator_version ="
        " (SELECT max(originator_version) FROM ledger_events WHERE originator_id = %s)",
        stream,
        stream,
    )


def rewrite(db: Database, stream: uuid.UUID, version: int, old: bytes, new: bytes) -> None:
    """Change one event's stored JSON and recompute its hash and every later hash of its
    stream consistently: the chain verifies again, only committed heads can tell."""
    with psycopg.connect(db.url) as conn:
        rows = conn.execute(
            "SELECT originator_version, topic, state, prev_hash FROM ledger_events"
            " WHERE originator_id = %s AND originator_version >= %s ORDER BY originator_version",
            (stream, version),
        ).fetchall()
        previous = bytes(rows[0][3])
        for v, topic, state, _ in rows:
            stored = bytes(state).replace(old, new) if v == version else bytes(state)
            assert v != version or stored != bytes(state)
            current = row_hash(previous, stream, v, topic, stored)
            conn.execute(
                "UPDATE ledger_events SET state = %s, prev_hash = %s, hash = %s"
                " WHERE originator_id = %s AND originator_version = %s",
                (stored, previous, current, stream, v),
            )
            previous = current


def append_after_end(db: Database, stream: uuid.UUID) -> None:
    """Insert a copy of the stream's last event after it, correctly chained."""
    with psycopg.connect(db.url) as conn:
        v, topic, state, last = conn.execute(
            "SELECT originator_version, topic, state, hash FROM ledger_events"
            " WHERE originator_id = %s ORDER BY originator_version DESC LIMIT 1",
            (stream,),
        ).fetchone() or (0, "", b"", b"")
        conn.execute(
            "INSERT INTO ledger_events SELECT originator_id, %s, topic, state,"
            " (SELECT max(notification_id) + 1 FROM ledger_events), transaction_id, %s, %s"
            " FROM ledger_events WHERE originator_id = %s AND originator_version = %s",
            (
                v + 1,
                bytes(last),
                row_hash(bytes(last), stream, v + 1, topic, bytes(state)),
                stream,
                v,
            ),
        )


def version_of(ledger: Ledger, stream: uuid.UUID, kind: type[ev.LedgerEvent]) -> int:
    [event] = [e for e in ledger.stream(stream) if isinstance(e, kind)]
    return event.originator_version


def named(mismatches: list[HeadMismatch]) -> list[tuple[str, str]]:
    return [(m.label, m.reason) for m in mismatches]


def test_each_ended_run_is_sealed_and_an_untouched_ledger_verifies(
    ledger: Ledger, tmp_path: Path
) -> None:
    runs = history(ledger)
    app_dir, _ = trader(tmp_path, "asker", 'ask = ["place_order"]')
    ledger.register_agent("asker", app_dir)
    parked, approval_id = asyncio.run(park(ledger, "asker"))
    assert not any(isinstance(e, ev.RunSealed) for e in ledger.stream(agent_stream_id("asker")))
    digest = digest_of(ledger, "asker", approval_id)
    answer_directly(ledger, "asker", Decision(approval_id, True, "alice", digest=digest))
    assert asyncio.run(resumed(ledger, "asker", parked)).status == "completed"

    heads = ledger.chains.stream_heads([*runs, uuid.UUID(parked)])
    seals = [
        e
        for a in (AGENT, "asker")
        for e in ledger.stream(agent_stream_id(a))
        if isinstance(e, ev.RunSealed)
    ]
    assert {s.run_id: (s.version, s.hash) for s in seals} == {
        r: (v, h.hex()) for r, (v, h) in heads.items()
    }
    report = verify_agent(ledger)
    assert report.ok and report.sealed_runs == 4 and report.anchor is None
    ledger.chains.anchor()
    anchored = verify_agent(ledger, AGENT)
    assert anchored.ok and anchored.sealed_runs == 3 and anchored.anchor == "anchor 1 in the ledger"


def test_a_deleted_run_tail_a_deleted_run_stream_and_an_appended_event_are_named(
    ledger: Ledger, fresh_db: Database
) -> None:
    first, second, third = history(ledger)
    (v1, _), (_, h3) = (
        ledger.chains.stream_heads([first])[first],
        ledger.chains.stream_heads([third])[third],
    )
    delete_last(fresh_db, first)
    sql(fresh_db, "DELETE FROM ledger_events WHERE originator_id = %s", second)
    append_after_end(fresh_db, third)
    report = verify_agent(ledger, AGENT)
    assert not report.breaks  # every remaining chain holds: only the seals tell
    assert named(report.mismatches) == [
        (f"agent {AGENT} run 1", "the stream ends 1 event(s) short: its tail was deleted"),
        (f"agent {AGENT} run 2", "the stream is missing (deleted)"),
        (f"agent {AGENT} run 3", "1 event(s) were appended after the run's end"),
    ]
    tail = report.mismatches[0]
    assert (tail.stream, tail.expected_version, tail.found_version) == (first, v1, v1 - 1)
    assert report.mismatches[2].found_hash == h3.hex()
    assert f"agent {AGENT} run 1 (stream {first})" in str(tail)


def test_after_an_anchor_a_deleted_agent_tail_and_a_rewrite_with_hashes_recomputed_are_named(
    ledger: Ledger, fresh_db: Database
) -> None:
    first, *_ = history(ledger)
    ledger.chains.anchor()
    agent_stream = agent_stream_id(AGENT)
    [sealed_first] = [
        e for e in ledger.stream(agent_stream) if isinstance(e, ev.RunSealed) and e.run_id == first
    ]
    assert isinstance(ledger.stream(agent_stream)[-1], ev.RunSealed)
    delete_last(fresh_db, agent_stream)  # the last run's seal: nothing else points at it
    decision = version_of(ledger, first, ev.DecisionLogged)  # its reasoning is sealed:
    rewrite(fresh_db, first, decision, b'"decision_type":"other"', b'"decision_type":"trade"')
    assert ledger.chains.verify().ok  # the chains hold
    report = verify_agent(ledger, AGENT)
    rewritten = (
        f"agent {AGENT} run 1",
        f"the event at version {ledger.chains.stream_heads([first])[first][0]} is not the one "
        "committed: it was rewritten (with its hashes recomputed)",
    )
    assert sorted(named(report.mismatches)) == sorted(
        [
            rewritten,  # against its seal
            (f"agent {AGENT}", "the stream ends 1 event(s) short: its tail was deleted"),
            rewritten,  # against the anchor
        ]
    )
    assert sorted(m.by for m in report.mismatches) == [
        f"RunSealed at agent version {sealed_first.originator_version}",
        "anchor 1 in the ledger",
        "anchor 1 in the ledger",
    ]


def test_an_anchor_kept_outside_catches_what_deleting_the_anchors_hides(
    ledger: Ledger, fresh_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history(ledger)
    monkeypatch.setenv("OWLCLAW_DATABASE_URL", fresh_db.url)
    monkeypatch.setenv("OWLCLAW_DATABASE_NAME", str(fresh_db.params["dbname"]))
    monkeypatch.setenv("OWLCLAW_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()
    printed = runner.invoke(cli, ["anchor", "--json"])
    assert printed.exit_code == 0, printed.output
    kept = tmp_path / "anchor.json"
    kept.write_text(printed.stdout)
    assert json.loads(printed.stdout)["anchor"] == 1
    shown = runner.invoke(cli, ["anchor"])
    assert shown.exit_code == 0 and "anchor 2 at " in shown.stdout
    assert f"{agent_stream_id(AGENT)} " in shown.stdout  # each head, one per line

    delete_last(fresh_db, agent_stream_id(AGENT))
    sql(fresh_db, "DELETE FROM ledger_events WHERE originator_id = %s", ANCHOR_STREAM_ID)
    blind = runner.invoke(cli, ["verify", "--json"])
    assert blind.exit_code == 0 and json.loads(blind.stdout)["ok"] is True

    caught = runner.invoke(cli, ["verify", "--anchor", str(kept), "--json"])
    assert caught.exit_code == 1, caught.output
    [mismatch] = json.loads(caught.stdout)["mismatches"]
    assert mismatch["label"] == f"agent {AGENT}"
    assert mismatch["found_version"] == mismatch["expected_version"] - 1
    human = runner.invoke(cli, ["verify", AGENT, "--anchor", str(kept)])
    assert human.exit_code == 1 and f"MISMATCH agent {AGENT} (stream" in human.stdout

    edited = json.loads(printed.stdout)
    edited["heads"][0]["version"] += 1
    kept.write_text(json.dumps(edited))
    refused = runner.invoke(cli, ["verify", "--anchor", str(kept)])
    assert refused.exit_code == 2 and "the file was altered" in refused.stderr
