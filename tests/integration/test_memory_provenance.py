"""Memory provenance on the real PostgreSQL + pgvector with the real embedder: the memory view's
provenance columns (refilled by a rebuild for rows projected before they existed), MEMORY.md's
references, and ``owlclaw memory`` / ``owlclaw why`` as a user runs them, including a tampered
run stream that ``why`` reports as a broken chain."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.audit.why import walk
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from projections.memory_files import render_memory_files
from projections.rebuild import rebuild
from tests.cli import owlclaw_on as owlclaw
from tests.scripted import call, decide, play, run_events

pytestmark = pytest.mark.integration

AGENT = "keeper"
LESSON = "After sharp market drop, rebound signals are usually accurate within 2 hours"
QUERY = "market crash recovery"


def remembering_run(ledger: Ledger) -> list[ev.LedgerEvent]:
    """The agent's run 1: a decision logged (step 1), then LESSON remembered (step 2)."""
    runtime = AgentRuntime(ledger, AGENT, models=["x"])
    steps = [
        decide(1),
        {"tool_calls": [call("remember", content=LESSON, tags=["trading"])]},
        {"content": "done"},
    ]
    try:
        return run_events(ledger, play(runtime, steps))
    finally:
        runtime.close()


def remembered_call(events: list[ev.LedgerEvent]) -> tuple[ev.MemoryRemembered, str]:
    [memory] = [e for e in events if isinstance(e, ev.MemoryRemembered)]
    [call_id] = [
        e.call_id for e in events if isinstance(e, ev.ToolCallRequested) and e.tool == "remember"
    ]
    return memory, call_id


def test_the_view_keeps_each_memorys_provenance_and_a_rebuild_refills_it(
    ledger: Ledger, local_embedder: Embedder, fresh_db: Database, tmp_path: Path
) -> None:
    memory, call_id = remembered_call(remembering_run(ledger))
    key = (memory.originator_id, memory.originator_version)
    stored = ledger.chains.event_hashes([key])[key].hex()
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()

    def source_and_heading(directory: str) -> tuple[object, str]:
        [found] = MemoryStore(view).recall(AGENT, QUERY, limit=1).memories
        memory_md, _ = render_memory_files(view, AGENT, tmp_path / directory)
        heading = next(line for line in memory_md.read_text().splitlines() if line[:3] == "## ")
        return found.source, heading

    source, heading = source_and_heading("now")
    assert source is not None
    assert (source.run_id, source.run_no, source.step, source.call_id) == (
        memory.originator_id,
        1,
        2,
        call_id,
    )
    assert (source.version, source.event_hash) == (memory.originator_version, stored)
    assert heading.endswith(f"· {memory.memory_id} (run 1, step 2)")

    # rows projected before the view kept provenance: the columns' defaults, no reference
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE memories SET run_no = 0, step = 0, call_id = '', version = 0, event_hash = NULL"
        )
    old, old_heading = source_and_heading("old")
    assert old is not None and (old.run_no, old.version, old.event_hash) == (0, 0, "")
    assert old_heading.endswith(f"· {memory.memory_id}")

    rebuild(ledger, MemoryView, embedder=local_embedder)
    assert source_and_heading("rebuilt") == (source, heading)


def test_memory_and_why_show_the_path_and_why_finds_a_tampered_run(
    fresh_db: Database, local_embedder: Embedder, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as ledger:
        events = remembering_run(ledger)
    memory, call_id = remembered_call(events)
    run_id = memory.originator_id
    [response] = [
        e for e in events if isinstance(e, ev.LLMResponded) and "remember" in json.dumps(e.message)
    ]

    shown = owlclaw(fresh_db, "memory", AGENT, "--recall", QUERY, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    [recalled] = [m for m in data["recall"]["memories"] if m["content"] == LESSON]
    assert recalled["source"]["run_no"] == 1 and recalled["source"]["step"] == 2
    assert recalled["source"]["call_id"] == call_id
    assert recalled["source"]["version"] == memory.originator_version
    assert f"{memory.memory_id} (run 1, step 2)" in Path(data["memory_md"]).read_text()

    found = owlclaw(fresh_db, "why", AGENT, QUERY, "--limit", "1", "--json", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    walked = json.loads(found.stdout)
    assert walked["verified"] is True and walked["agent_id"] == AGENT
    [trail] = walked["trails"]
    assert trail["memory"]["content"] == LESSON
    assert (trail["run_id"], trail["run_no"], trail["step"], trail["call_id"]) == (
        str(run_id),
        1,
        2,
        call_id,
    )
    assert trail["response"]["version"] == response.originator_version
    assert LESSON in trail["response"]["excerpt"]
    assert trail["chain"] == {
        "verified": True,
        "checked": memory.originator_version,
        "problems": [],
    }
    human = owlclaw(fresh_db, "why", AGENT, QUERY, "--limit", "1", cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    text = " ".join(human.stdout.split())
    assert f"run 1 (stream {run_id})" in text and f"step 2, call {call_id}" in text
    assert "chain verified" in text and f"owlclaw explain {AGENT} 1 2" in text

    # the model response that remembered it, altered in place (its model's name: its message
    # is sealed): the chain breaks there
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = convert_to(replace(convert_from(state, 'UTF8'),"
            " '\"model\":\"scripted/', '\"model\":\"altered/'), 'UTF8')"
            " WHERE originator_id = %s AND originator_version = %s",
            (run_id, response.originator_version),
        )
    broken = owlclaw(fresh_db, "why", AGENT, QUERY, "--limit", "1", "--json", cwd=tmp_path)
    assert broken.returncode == 1, broken.stderr
    walked = json.loads(broken.stdout)
    assert walked["verified"] is False
    [problem] = walked["trails"][0]["chain"]["problems"]
    assert f"stream {run_id} version {response.originator_version}" in problem
    assert "altered" in problem
    human = owlclaw(fresh_db, "why", AGENT, QUERY, "--limit", "1", cwd=tmp_path)
    assert human.returncode == 1 and "chain BROKEN" in human.stdout


def test_why_refuses_an_unknown_agent(fresh_db: Database, tmp_path: Path) -> None:
    result = owlclaw(fresh_db, "why", "ghost", "anything", cwd=tmp_path)
    assert result.returncode == 3
    assert "unknown agent 'ghost'" in result.stderr and "Traceback" not in result.stderr


def test_a_memory_without_a_model_response_is_walked_to_its_run(
    ledger: Ledger, local_embedder: Embedder, fresh_db: Database
) -> None:
    """A memory recorded by hand (no remember call, no model response): why names its run,
    says no response is recorded, and still verifies the chain up to its event."""
    agent = ledger.register_agent("hand")
    run = Run.start("hand", agent.queue_run("webhook"))
    run.record(ev.MemoryRemembered, agent_id="hand", memory_id=uuid.uuid4(), content=LESSON)
    ledger.append(agent, run)
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    [found] = MemoryStore(view).recall("hand", QUERY, limit=1).memories
    trail = walk(ledger, found)
    assert (trail.run_no, trail.step, trail.call_id, trail.response) == (1, 0, "", None)
    assert trail.chain.verified and trail.chain.checked == 2
