"""Views over an archived ledger: a rebuild from position 0 (`owlclaw projections rebuild`, and
the live rebuild of a view whose version went up) reads archived runs' events from their
archive files at their old log positions, so the memory view, recall, MEMORY.md, the runs and
the tool calls come out as they were before the archiving."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from events import Ledger
from events import catalog as ev
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.cli import app as cli
from owlclaw.compose.read import open_served_views, open_views
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.database import Database
from projections import AuditView, MemoryStore, MemoryView, ProjectionRunner, RunsView
from projections.embedders import Embedder
from projections.memory_files import agent_directory
from projections.rebuild import older, upgrade
from tests.ledger_runs import remember, tomorrow
from tests.postgres import rows

pytestmark = pytest.mark.integration

AGENT = "keeper"
NOTES = [
    "The ferry to Cacilhas leaves every 20 minutes from Cais do Sodre",
    "Tram 28 is crowded before 10am; take it after lunch",
    "The bakery on Rua da Rosa closes on Mondays",
]
LIVE = "The river tide tables are posted at the ferry terminal"


MEMORY_ROWS = (
    "SELECT memory_id, agent_id, content, tags, run_id, created_at, position, bytes, archived,"
    " run_no, step, call_id, version, event_hash FROM memories ORDER BY position"
)
RUN_ROWS = "SELECT * FROM runs ORDER BY position"
CALL_ROWS = "SELECT * FROM audit_tool_calls ORDER BY position"


def remembering_runs(ledger: Ledger) -> None:
    """AGENT's ended runs, each remembering a note through a ``remember`` call after a model
    response; then a run left open (never archived) that remembers one more."""
    agent = ledger.register_agent(AGENT)
    for n, note in enumerate(NOTES):
        run = Run.start(AGENT, agent.queue_run(trigger="webhook", focus=f"note {n}"))
        memory_id = uuid.uuid4()
        run.record(
            ev.LLMResponded,
            model="scripted/t",
            message={"n": n},
            usage={"total_tokens": 10},
            cost_usd=0.001,
        )
        run.record(ev.ToolCallRequested, call_id="c1", tool="remember", arguments={"c": note})
        run.record(
            ev.MemoryRemembered, agent_id=AGENT, memory_id=memory_id, content=note, tags=["city"]
        )
        run.record(
            ev.ToolCallSucceeded,
            call_id="c1",
            tool="remember",
            result={"memory_id": str(memory_id)},
            duration_ms=1.0,
        )
        run.record(ev.RunCompleted, iterations=1, tool_calls=1)
        ledger.append(agent, run)
    remember(ledger, ledger.load_agent(AGENT), [LIVE])


def memory_md(config: OwlClawConfig) -> Path:
    return agent_directory(config.memory_path, AGENT) / "MEMORY.md"


def seen(db: Database, config: OwlClawConfig, memory: MemoryView) -> dict[str, Any]:
    """What the views show: their rows, a recall with each memory's provenance, MEMORY.md."""
    recalled = MemoryStore(memory).recall(AGENT, "ferry across the river", limit=10)
    return {
        "memories": rows(db, MEMORY_ROWS),
        "recall": sorted((m.content, m.source) for m in recalled.memories),
        "memory_md": memory_md(config).read_text(),
        "runs": rows(db, RUN_ROWS),
        "tool_calls": rows(db, CALL_ROWS),
    }


@pytest.fixture
def config(fresh_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OwlClawConfig:
    """The CLI's configuration on the test's database, the archive under ``tmp_path``."""
    monkeypatch.setenv("OWLCLAW_DATABASE_URL", fresh_db.url)
    monkeypatch.setenv("OWLCLAW_DATABASE_NAME", str(fresh_db.params["dbname"]))
    monkeypatch.setenv("OWLCLAW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OWLCLAW_ARCHIVE_DIR", str(tmp_path / "archive"))
    return load_config()


def test_views_rebuilt_after_archiving_have_the_archived_runs(
    fresh_db: Database,
    config: OwlClawConfig,
    local_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = CliRunner()
    with Ledger(fresh_db.url, archive_dir=config.archive_path) as ledger:
        remembering_runs(ledger)
        views = open_views(ledger, config, local_embedder)
        for view in views:
            ProjectionRunner(ledger, view).catch_up()
        memory = next(v for v in views if isinstance(v, MemoryView))
        before = seen(fresh_db, config, memory)
        assert len(before["memories"]) == len(before["recall"]) == 4
        assert all(note in before["memory_md"] for note in [*NOTES, LIVE])
        assert (len(before["runs"]), len(before["tool_calls"])) == (4, 3)

        archived = runner.invoke(cli, ["archive", "--before", tomorrow()])
        assert archived.exit_code == 0, archived.output
        [seal] = [
            e for e in ledger.stream(agent_stream_id(AGENT)) if isinstance(e, ev.ArchiveSealed)
        ]
        assert [r.run_no for r in seal.runs] == [1, 2, 3]
        gone = ", ".join(f"'{r.run_id}'" for r in seal.runs)
        assert rows(
            fresh_db, f"SELECT count(*) FROM ledger_events WHERE originator_id IN ({gone})"
        )[0] == (0,)

        memory_md(config).unlink()  # a rebuild writes it again
        for name in ("memory", "runs", "audit"):
            rebuilt = runner.invoke(cli, ["projections", "rebuild", name])
            assert rebuilt.exit_code == 0, rebuilt.output
        assert seen(fresh_db, config, memory) == before

        for kind in (MemoryView, RunsView, AuditView):  # their code's version went up
            monkeypatch.setattr(kind, "version", kind.version + 1)
        served, behind = open_served_views(ledger, config, local_embedder)
        assert {c.name for c in behind} == {"memory", "runs", "audit"}
        memory_md(config).unlink()
        for configured in behind:  # as `owlclaw run` does, in its upgrade workers
            upgrade(ledger, configured.view, threading.Event(), **configured.options)
        assert older(served) == []
        assert seen(fresh_db, config, memory) == before
