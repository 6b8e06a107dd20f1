"""The memory age policy on the real PostgreSQL ledger and memory view: memories not recalled
for the archive age are archived (MemoryArchived), archived ones deleted after the delete age
(MemoryExpired, their content erased); recall skips archived memories; `owlclaw memory
--archived` lists them; a rebuild of the view gives the same state. Time is a clock the test
moves: the events' timestamps and the pass's now, never a sleep."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from events import Ledger
from events import catalog as ev
from events.errors import StreamConflict
from owlclaw.cli import app
from owlclaw.config import RuntimeConfig
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from projections.memory import MemoryAge
from projections.memory_ages import AgePolicy, Applied, apply_age_policy
from projections.rebuild import rebuild
from tests.scripted import agent_events, call, play, run_events

pytestmark = pytest.mark.integration

LESSON = "After sharp drop, rebound signals accurate within 2h"
BROKER = "The broker API rate-limits at 10 requests/s"
START = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = AgePolicy(archive_after_days=90, delete_after_days=365)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, days: int) -> datetime:
        self.now += timedelta(days=days)
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    """The time every event recorded from now on is stamped with."""
    moving = Clock()
    monkeypatch.setattr("events.aggregate.now", moving)
    yield moving


def one_call(runtime: AgentRuntime, ledger: Ledger, tool: str, **arguments: Any) -> Any:
    result = play(runtime, [{"tool_calls": [call(tool, **arguments)]}, {"content": "ok"}])
    [done] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    return done.result


def recalled(store: MemoryStore, query: str) -> list[str]:
    return [m.content for m in store.recall("trader", query, limit=20, min_similarity=-1).memories]


def state(view: MemoryView) -> tuple[list[Any], list[Any]]:
    return list(view.memory_ages()), view.archived_memories("trader")


def test_unrecalled_memories_are_archived_then_deleted_with_recorded_events(
    ledger: Ledger, local_embedder: Embedder, fresh_db: Database, tmp_path: Path, clock: Clock
) -> None:
    view = MemoryView(ledger, embedder=local_embedder, memory_dir=tmp_path / "memory")
    view.create_table()
    store, runner = MemoryStore(view), ProjectionRunner(ledger, view)
    limits = RuntimeConfig(recall_in_prompt=0)  # the recall tool's calls only
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=store, limits=limits)
    broker = UUID(one_call(runtime, ledger, "remember", content=BROKER)["memory_id"])
    lesson = UUID(one_call(runtime, ledger, "remember", content=LESSON)["memory_id"])
    runner.catch_up()

    clock.advance(60)
    found = one_call(runtime, ledger, "recall", query="market crash recovery", limit=1)
    assert [m["memory_id"] for m in found["memories"]] == [str(lesson)]
    runner.catch_up()
    assert apply_age_policy(view, POLICY, clock.advance(29)) == []  # 89 days: nothing due

    [applied] = apply_age_policy(view, POLICY, clock.advance(1))
    assert (applied.archived, applied.deleted) == ([broker], [])
    assert apply_age_policy(view, POLICY, clock.now, wait_s=0) == []  # the view is behind
    runner.catch_up()
    assert apply_age_policy(view, POLICY, clock.now) == []  # already archived
    [archived] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryArchived)]
    assert archived.memory_ids == [broker] and archived.age_days == 90
    assert archived.reason == "not recalled for 90 days"
    assert recalled(store, "broker API rate limits") == [LESSON]  # recall skips it
    memory_md = (tmp_path / "memory" / "trader" / "MEMORY.md").read_text()
    assert BROKER not in memory_md and LESSON in memory_md
    assert BROKER in (tmp_path / "memory" / "trader" / "MEMORY.archive.md").read_text()
    [listed] = view.archived_memories("trader")
    assert (listed.memory_id, listed.content, listed.last_recalled) == (broker, BROKER, None)
    assert listed.archived_at == archived.timestamp == clock.now

    # a year on: the archived one is deleted, the lesson (unused since its recall) archived
    [applied] = apply_age_policy(view, POLICY, clock.advance(365))
    assert (applied.archived, applied.deleted) == ([lesson], [broker])
    runner.catch_up()
    [expired] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryExpired)]
    assert expired.memory_ids == [broker] and expired.age_days == 365 and expired.keys
    assert expired.reason == "archived 365 days ago"
    assert [m.memory_id for m in view.archived_memories("trader")] == [lesson]
    assert view.archived_memories("trader")[0].last_recalled == START + timedelta(days=60)
    contents = [
        e.content
        for run_id in ledger.load_agent("trader").run_ids()
        for e in ledger.stream(run_id)
        if isinstance(e, ev.MemoryRemembered)
    ]
    assert contents == ["[erased]", LESSON]  # the deleted one's key destroyed, as erase does
    assert recalled(store, "market crash recovery") == []
    assert BROKER not in (tmp_path / "memory" / "trader" / "MEMORY.archive.md").read_text()
    assert ledger.chains.verify().ok

    # remembering the same text again makes a new, active memory
    again = UUID(one_call(runtime, ledger, "remember", content=LESSON)["memory_id"])
    runner.catch_up()
    assert again != lesson and recalled(store, "market crash recovery") == [LESSON]

    before = state(view)
    rebuild(ledger, MemoryView, embedder=local_embedder, memory_dir=tmp_path / "memory")
    assert state(view) == before


def test_a_memory_recalled_into_the_prompt_counts_as_recalled(
    ledger: Ledger, local_embedder: Embedder, clock: Clock
) -> None:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    store, runner = MemoryStore(view), ProjectionRunner(ledger, view)
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=store)
    lesson = UUID(one_call(runtime, ledger, "remember", content=LESSON)["memory_id"])
    runner.catch_up()
    clock.advance(80)
    play(runtime, [{"content": "noted"}], focus="market crash recovery")
    runner.catch_up()
    assert apply_age_policy(view, POLICY, clock.advance(30)) == []
    [age] = view.memory_ages()
    assert (age.memory_id, age.last_used) == (lesson, START + timedelta(days=80))


def test_owlclaw_memory_archived_lists_each_with_its_last_recall_and_deletion_date(
    ledger: Ledger, local_embedder: Embedder, fresh_db: Database, tmp_path: Path, clock: Clock
) -> None:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=MemoryStore(view))
    broker = one_call(runtime, ledger, "remember", content=BROKER)["memory_id"]
    ProjectionRunner(ledger, view).catch_up()
    apply_age_policy(view, POLICY, clock.advance(100))
    env = {
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
        "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",
    }
    listed = CliRunner().invoke(app, ["memory", "trader", "--archived", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    [shown] = json.loads(listed.stdout)["archived"]
    assert shown["memory_id"] == broker and shown["last_recalled"] is None
    assert datetime.fromisoformat(shown["archived_at"]) == clock.now
    assert datetime.fromisoformat(shown["deletes_at"]) == clock.now + timedelta(days=365)
    printed = CliRunner().invoke(app, ["memory", "trader", "--archived"], env=env)
    assert printed.exit_code == 0, printed.output
    text = table_text(printed.stdout)
    assert broker in text and "recalled never" in text and "deleted 2027-04-11" in text
    assert "not recalled for 90 days" in text


def table_text(printed: str) -> str:
    """A printed table's cells read column by column, its borders and whitespace removed: what
    a cell says however narrow the terminal wrapped it (Rich may not see COLUMNS)."""
    columns: dict[int, list[str]] = {}
    for line in printed.splitlines():
        cells = re.split(r"[│┃|]", line)
        if len(cells) < 3:  # not a row of the table (its title, a rule, a line about it)
            columns.setdefault(-1, []).append(line)
        for i, cell in enumerate(cells[1:-1]):
            columns.setdefault(i, []).append(cell)
    return " ".join(" ".join(" ".join(cells).split()) for _, cells in sorted(columns.items()))


def test_two_passes_at_once_archive_a_memory_once(
    ledger: Ledger, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """Two processes read the view at the same moment; one appends first. The other, loading
    the agent after that append, finds a memory event the view it read had not absorbed and
    leaves the agent alone (loading before it, its append would conflict)."""
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=MemoryStore(view))
    one_call(runtime, ledger, "remember", content=BROKER)
    ProjectionRunner(ledger, view).catch_up()
    other = MemoryView(ledger, embedder=local_embedder)  # the second process's
    first: list[Applied] = []

    def read_then_the_first_appends() -> Iterator[MemoryAge]:
        rows = list(MemoryView.memory_ages(other))
        first.extend(apply_age_policy(view, POLICY, clock.now))
        return iter(rows)

    monkeypatch.setattr(other, "memory_ages", read_then_the_first_appends)
    second = apply_age_policy(other, POLICY, clock.advance(100))
    assert [len(a.archived) for a in first] == [1] and second == []
    archives = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryArchived)]
    assert len(archives) == 1


def test_a_deletion_whose_record_was_lost_is_erased_already_and_recorded_by_the_next_pass(
    ledger: Ledger, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """The pass destroys the expired memory's key, then loses its append (another writer, or a
    process that died): the content is unreadable already, and the next pass records the
    deletion naming the key."""
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view)
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=MemoryStore(view))
    one_call(runtime, ledger, "remember", content=BROKER)
    runner.catch_up()
    apply_age_policy(view, POLICY, clock.advance(100))
    runner.catch_up()

    def lost(aggregate: Any) -> None:
        raise StreamConflict("another writer appended first")

    with monkeypatch.context() as patched:
        patched.setattr(ledger, "append", lost)
        assert apply_age_policy(view, POLICY, clock.advance(365)) == []
    assert not [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryExpired)]
    [remembered] = [
        e
        for run_id in ledger.load_agent("trader").run_ids()
        for e in ledger.stream(run_id)
        if isinstance(e, ev.MemoryRemembered)
    ]
    assert remembered.content == "[erased]"

    [applied] = apply_age_policy(view, POLICY, clock.now)
    [expired] = [e for e in agent_events(ledger, "trader") if isinstance(e, ev.MemoryExpired)]
    assert applied.deleted == expired.memory_ids and expired.keys
    runner.catch_up()
    assert view.archived_memories("trader") == []
