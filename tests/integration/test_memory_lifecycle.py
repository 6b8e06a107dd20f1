"""Memory lifecycle on the real PostgreSQL + pgvector with the real embedder: archived and
forgotten memories leave recall (the ledger keeps them), recall's relevance floor, and the memory
view keeping MEMORY.md current (atomically, the same after a rebuild, a write failure logged
without stopping the view)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.config import RuntimeConfig
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from projections.rebuild import rebuild
from projections.status import projection_status
from tests.scripted import agent_events, call, play, run_events

pytestmark = pytest.mark.integration

LESSON = "After sharp drop, rebound signals accurate within 2h"
COFFEE = "The coffee machine is on the third floor"


def memory_view(ledger: Ledger, embedder: Embedder, memory_dir: Path | None) -> MemoryView:
    view = MemoryView(ledger, embedder=embedder, memory_dir=memory_dir)
    view.create_table()
    return view


def step(runtime: AgentRuntime, ledger: Ledger, tool: str, **arguments: Any) -> dict[str, Any]:
    """One run making one call; its successful result."""
    result = play(runtime, [{"tool_calls": [call(tool, **arguments)]}, {"content": "ok"}])
    [done] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert isinstance(done.result, dict)
    return done.result


def remember(runtime: AgentRuntime, ledger: Ledger, content: str) -> UUID:
    return UUID(step(runtime, ledger, "remember", content=content)["memory_id"])


def recalled(store: MemoryStore, agent: str, query: str) -> list[str]:
    return [m.content for m in store.recall(agent, query, limit=20).memories]


def test_archived_and_forgotten_memories_leave_recall_and_memory_md_and_the_ledger_keeps_them(
    ledger: Ledger, local_embedder: Embedder, fresh_db: Database, tmp_path: Path
) -> None:
    view = memory_view(ledger, local_embedder, tmp_path)
    store = MemoryStore(view)
    runner = ProjectionRunner(ledger, view)
    limits = RuntimeConfig(max_memories=2)
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=store, limits=limits)
    oldest = remember(runtime, ledger, "The broker API rate-limits at 10 requests/s")
    lesson = remember(runtime, ledger, LESSON)
    runner.catch_up()
    memory_md = tmp_path / "trader" / "MEMORY.md"
    assert LESSON in memory_md.read_text()  # written by the view, not by `owlclaw memory`
    before = memory_md.open(encoding="utf-8")

    third = step(runtime, ledger, "remember", content=COFFEE)
    assert third["archived_memory_ids"] == [str(oldest)]
    runner.catch_up()
    assert "rate-limits" not in " ".join(recalled(store, "trader", "broker API rate limits"))
    assert "rate-limits" in (tmp_path / "trader" / "MEMORY.archive.md").read_text()
    assert "rate-limits" not in memory_md.read_text()
    assert LESSON in before.read()  # replaced by a rename: an open reader keeps the old file
    before.close()

    forgot = step(runtime, ledger, "forget", memory_id=str(lesson))
    assert forgot == {"success": True, "memory_id": str(lesson)}
    runner.catch_up()
    assert LESSON not in recalled(store, "trader", "market crash recovery")
    assert LESSON not in memory_md.read_text() and COFFEE in memory_md.read_text()
    assert LESSON not in (tmp_path / "trader" / "MEMORY.archive.md").read_text()
    assert not [p for p in (tmp_path / "trader").iterdir() if p.name.endswith(".tmp")]

    ledger_facts = [
        e.content
        for run_id in ledger.load_agent("trader").run_ids()
        for e in ledger.stream(run_id)
        if isinstance(e, ev.MemoryRemembered)
    ]  # the ledger keeps the archived and the forgotten memory
    assert ledger_facts == ["The broker API rate-limits at 10 requests/s", LESSON, COFFEE]
    [archived] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryArchived)]
    with psycopg.connect(fresh_db.url) as conn:
        rows = conn.execute(
            "SELECT topic FROM ledger_events WHERE transaction_id = (SELECT transaction_id"
            " FROM ledger_events WHERE originator_id = %s AND originator_version = %s)",
            (archived.originator_id, archived.originator_version),
        ).fetchall()
    topics = {topic for (topic,) in rows}
    # archived in the commit of the memory that reached the limit
    assert {"MemoryArchived", "MemoryAdded", "MemoryRemembered"} <= topics


def test_a_rebuild_from_position_0_ends_with_the_same_memory_md(
    ledger: Ledger, local_embedder: Embedder, tmp_path: Path
) -> None:
    view = memory_view(ledger, local_embedder, tmp_path)
    runtime = AgentRuntime(ledger, "writer", models=["x"], limits=RuntimeConfig(max_memories=2))
    ids = [remember(runtime, ledger, f"fact {i}: ~~~~ fenced") for i in range(3)]
    step(runtime, ledger, "forget", memory_id=str(ids[1]))
    ProjectionRunner(ledger, view).catch_up()
    files = [tmp_path / "writer" / name for name in ("MEMORY.md", "MEMORY.archive.md")]
    written = [f.read_bytes() for f in files]
    assert (
        b"fact 2" in written[0] and b"fact 0" in written[1] and b"fact 1" not in b"".join(written)
    )
    for f in files:
        f.unlink()
    rebuild(ledger, MemoryView, embedder=local_embedder, memory_dir=tmp_path)
    assert [f.read_bytes() for f in files] == written


def test_a_memory_md_that_cannot_be_written_is_logged_and_the_view_goes_on(
    ledger: Ledger, local_embedder: Embedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "blocked").write_text("a file where the agent's directory would be")
    view = memory_view(ledger, local_embedder, tmp_path)
    runner = ProjectionRunner(ledger, view)
    blocked = AgentRuntime(ledger, "blocked", models=["x"], memory=MemoryStore(view))
    fine = AgentRuntime(ledger, "fine", models=["x"], memory=MemoryStore(view))
    remember(blocked, ledger, LESSON)
    remember(fine, ledger, COFFEE)
    with caplog.at_level(logging.ERROR, logger="projections.memory"):
        runner.catch_up()
    assert "MEMORY.md of agent 'blocked' not written" in caplog.text
    assert COFFEE in (tmp_path / "fine" / "MEMORY.md").read_text()
    assert recalled(MemoryStore(view), "blocked", "market crash recovery") == [LESSON]
    status = projection_status(ledger, view)
    assert status.lag_events == 0 and status.parked_count == 0


def test_an_unrelated_focus_recalls_nothing_into_the_prompt(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = memory_view(ledger, local_embedder, None)
    runner = ProjectionRunner(ledger, view)
    runtime = AgentRuntime(ledger, "floor", models=["x"], memory=MemoryStore(view))
    remember(runtime, ledger, LESSON)
    remember(runtime, ledger, COFFEE)
    runner.catch_up()
    unrelated = asyncio.run(runtime.briefing.system_prompt("learning Japanese kanji", "webhook"))
    assert "Relevant memories" not in unrelated.text and unrelated.inputs["memories"] == {}
    related = asyncio.run(runtime.briefing.system_prompt("market crash recovery", "webhook"))
    assert LESSON in related.text and COFFEE not in related.text
    assert list(related.inputs["memories"]) != []
    searched = step(runtime, ledger, "recall", query="the rules of chess")
    assert searched["count"] == 0 and searched["memories"] == []
    no_floor = AgentRuntime(
        ledger,
        "floor",
        models=["x"],
        memory=MemoryStore(view),
        limits=RuntimeConfig(recall_min_similarity=-1),
    )
    assert step(no_floor, ledger, "recall", query="the rules of chess")["count"] == 2


def test_memory_ids_of_other_agents_cannot_be_forgotten(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    view = memory_view(ledger, local_embedder, None)
    mine = AgentRuntime(ledger, "mine", models=["x"], memory=MemoryStore(view))
    other = AgentRuntime(ledger, "other", models=["x"], memory=MemoryStore(view))
    theirs = remember(other, ledger, LESSON)
    result = play(
        mine, [{"tool_calls": [call("forget", memory_id=str(theirs))]}, {"content": "ok"}]
    )
    [failed] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallFailed)]
    assert failed.error_code == "MEMORY_NOT_FOUND"
    ProjectionRunner(ledger, view).catch_up()
    assert recalled(MemoryStore(view), "other", "market crash recovery") == [LESSON]
    assert uuid.UUID(str(theirs)) in ledger.load_agent("other").state.memories


def test_an_agent_without_active_memories_runs_without_asking_the_memory_index(
    ledger: Ledger, local_embedder: Embedder
) -> None:
    """The agent's stream counts its active memories: with none, the prompt's recall finds
    nothing without a query, so even an index that is gone cannot touch such a run."""
    view = memory_view(ledger, local_embedder, None)
    quiet = AgentRuntime(ledger, "quiet", models=["x"], memory=MemoryStore(view))
    keeper = AgentRuntime(ledger, "keeper", models=["x"], memory=MemoryStore(view))
    lesson = remember(keeper, ledger, LESSON)
    with view.transaction(commit=True) as curs:
        curs.execute(view.sql("DROP TABLE {memories}"))

    def recall_warnings(runtime: AgentRuntime) -> list[str]:
        result = play(runtime, [{"content": "ok"}], focus="market crash recovery")
        events = run_events(ledger, result)
        return [e.message for e in events if isinstance(e, ev.RunWarning) and e.source == "recall"]

    assert recall_warnings(quiet) == []
    [warning] = recall_warnings(keeper)  # one active memory: the index was asked
    assert warning.startswith("memory index unavailable")
    step(keeper, ledger, "forget", memory_id=str(lesson))
    assert recall_warnings(keeper) == []
