"""Versioned views: a view whose code's version went up rebuilds itself in the background when
the service starts, while its old tables keep answering, switches over once caught up and
records the new version; a second start does not rebuild it again; a view a newer OwlClaw built
is refused before anything touches it."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from events import Ledger
from events.ledger_log import LoggedEvent
from owlclaw.app import load_app
from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.server.service import Service
from projections import MemoryStore, MemoryView, ProjectionRunner, RunsView
from projections.embedders import Embedder
from projections.locks import REBUILD_LOCK_CLASS
from projections.rebuild import RebuildRunning, rebuild
from projections.status import ProjectionStatus, projection_status
from projections.versions import ViewTooNew
from tests.apps import make_app
from tests.cli import owlclaw, user_env
from tests.ledger_runs import record_runs, remember
from tests.postgres import rows
from tests.waiting import await_for

pytestmark = pytest.mark.integration

LESSON = "After a sharp market drop, rebound signals are usually accurate within 2 hours"
NOTES = [LESSON] + [f"note {i} about the weather in Lisbon" for i in range(11)]
OLD = " [built by version 1]"
FRESH = "fresh note on the tides"


def config_for(db: Database, tmp_path: Path) -> OwlClawConfig:
    return OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        data_dir=str(tmp_path / "data"),
        runtime=RuntimeConfig(placement="local"),
    )


def served_app(tmp_path: Path) -> Path:
    return make_app(
        tmp_path / "quiet-app",
        config='[agent]\nid = "quiet"\nmodels = ["scripted/quiet"]\nheartbeat_s = 0\n',
    )


def memory_status(service: Service) -> ProjectionStatus:
    assert service.ledger is not None
    return projection_status(service.ledger, service.view(MemoryView))


def built_by_version_1(db: Database, embedder: Embedder) -> None:
    """A ledger of memories whose memory view version 1 built (its rows marked ``OLD``), by
    an OwlClaw that stored content in plaintext."""
    with Ledger(db.url, encrypt=False) as ledger:
        remember(ledger, ledger.register_agent("archivist"), NOTES)
        old = MemoryView(ledger, embedder=embedder)
        old.create_table()
        ProjectionRunner(ledger, old).catch_up()
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("UPDATE memories SET content = content || %s", (OLD,))
        conn.execute("UPDATE projection_versions SET version = 1 WHERE name = 'memory'")
    assert rows(db, "SELECT version FROM projection_versions WHERE name = 'memory'") == [(1,)]


@dataclass
class HeldRebuild:
    """A rebuild of the memory view held at its second batch until ``release`` is set."""

    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    batches: int = 0


def hold_the_rebuild(monkeypatch: pytest.MonkeyPatch) -> HeldRebuild:
    gate = HeldRebuild()
    prepare = MemoryView.prepare

    def held_prepare(view: MemoryView, batch: list[LoggedEvent]) -> None:
        if view.rebuilding:
            gate.batches += 1
            if gate.batches == 2:
                gate.held.set()
                assert gate.release.wait(120), "the test never released the rebuild"
        prepare(view, batch)

    monkeypatch.setattr("projections.runner.BATCH_SIZE", 5)  # so that it has several batches
    monkeypatch.setattr(MemoryView, "prepare", held_prepare)
    return gate


def answers_while_rebuilding(service: Service) -> None:
    """The old tables answer recall, the live runner keeps them current, the service answers
    its status, and the view's status shows the rebuild part-way."""
    assert service.ledger is not None
    ledger = service.ledger
    store = MemoryStore(service.view(MemoryView))
    assert store.recall("archivist", LESSON, limit=1).memories[0].content == LESSON + OLD
    written = remember(ledger, ledger.load_agent("archivist"), [FRESH])
    fresh = store.recall("archivist", "tides", after_position=written, timeout=30)
    assert FRESH in [m.content for m in fresh.memories]
    assert "quiet" in service.status()["agents"]  # what `owlclaw status` shows
    status = memory_status(service)
    assert (status.version, status.code_version) == (1, 4)
    progress = status.rebuilding
    assert progress is not None and 0 < progress.position < progress.head


async def switched_over(service: Service, db: Database) -> None:
    """The rebuilt tables serve, with every memory (also the one written during the rebuild)
    and none of the old rows."""
    assert service.ledger is not None
    runner = next(r for r in service.projections if r.view.name == "memory")
    assert await asyncio.to_thread(runner.wait_for, service.ledger.log.last_committed(), 30)
    store = MemoryStore(service.view(MemoryView))
    assert store.recall("archivist", LESSON, limit=1).memories[0].content == LESSON
    opened = service.ledger.sealer.open  # the fresh note is sealed, the old ones were not
    contents = [opened(c) for (c,) in rows(db, "SELECT content FROM memories")]
    assert sorted(contents) == sorted([*NOTES, FRESH])
    after = memory_status(service)
    assert after.rebuilding is None and after.parked_count == 0


def test_a_view_whose_version_went_up_rebuilds_live_and_switches_over_once_caught_up(
    fresh_db: Database, tmp_path: Path, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    built_by_version_1(fresh_db, local_embedder)
    assert MemoryView.version == 4  # the code now: each memory's last recall and archive kept
    gate = hold_the_rebuild(monkeypatch)
    config = config_for(fresh_db, tmp_path)
    app = load_app(served_app(tmp_path))

    async def scenario() -> None:
        service = Service(config, [app])
        try:
            await service.start()
            await await_for(gate.held.is_set, "the rebuild to be part-way")
            answers_while_rebuilding(service)
            upgrade = next(w for w in service.supervisor.status() if w.name == "upgrade:memory")
            assert upgrade.state == "running"
            gate.release.set()
            await await_for(
                lambda: memory_status(service).version == 4, "the switch-over to record version 4"
            )
            await await_for(lambda: upgrade.state == "done", "the upgrade job to be done")
            await switched_over(service, fresh_db)
        finally:
            gate.release.set()
            await service.stop()

        second = Service(config, [app])  # a second start: nothing left to rebuild
        try:
            await second.start()
            assert "upgrade:memory" not in [w.name for w in second.supervisor.status()]
            assert memory_status(second).version == 4
        finally:
            await second.stop()

    asyncio.run(scenario())
    assert gate.batches >= 2


def test_a_view_a_newer_owlclaw_built_is_refused_before_anything_touches_it(
    fresh_db: Database, tmp_path: Path
) -> None:
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE projection_versions (name text PRIMARY KEY, version int)")
        conn.execute("INSERT INTO projection_versions VALUES ('memory', 5)")
    config = config_for(fresh_db, tmp_path)
    app = load_app(served_app(tmp_path))

    async def scenario() -> None:
        service = Service(config, [app])
        try:
            with pytest.raises(ViewTooNew, match="newer OwlClaw"):
                await service.start()
        finally:
            await service.stop()

    asyncio.run(scenario())
    assert rows(fresh_db, "SELECT to_regclass('memories'), to_regclass('runs')") == [(None, None)]

    env = user_env(
        tmp_path / "data",
        free_port(),
        OWLCLAW_DATABASE_URL=fresh_db.url,
        OWLCLAW_DATABASE_NAME=str(fresh_db.params["dbname"]),
        OWLCLAW_PLACEMENT="local",
    )
    served = owlclaw(env, "run", str(served_app(tmp_path)), cwd=tmp_path)
    assert served.returncode == 1, served.stderr
    assert "the memory view's tables were built by a newer OwlClaw (view version 5;" in (
        served.stderr
    )
    assert "owlclaw projections rebuild" in served.stderr and "Traceback" not in served.stderr


def test_tables_made_before_views_had_versions_count_as_version_1(
    ledger: Ledger, fresh_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunsView, "version", 4)
    RunsView(ledger).create_table()  # new tables: the code's version
    assert rows(fresh_db, "SELECT version FROM projection_versions WHERE name = 'runs'") == [(4,)]
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute("DELETE FROM projection_versions")
    RunsView(ledger).create_table()  # tables there, no version recorded: made before versions
    assert rows(fresh_db, "SELECT version FROM projection_versions WHERE name = 'runs'") == [(1,)]


def test_a_manual_rebuild_records_its_version_and_is_refused_while_another_runs(
    ledger: Ledger, fresh_db: Database, pg_server: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_runs(ledger, ledger.register_agent("busy"), 2)
    view = RunsView(ledger)
    view.create_table()
    elsewhere = pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    try:  # a rebuild of another database's runs view is not this one's
        with psycopg.connect(elsewhere.url, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(%s, hashtext('runs'))", (REBUILD_LOCK_CLASS,))
            assert projection_status(ledger, view).rebuilding is None
    finally:
        pg_server.drop_database(str(elsewhere.params["dbname"]))
    with psycopg.connect(fresh_db.url, autocommit=True) as other:  # another process rebuilding
        other.execute("SELECT pg_advisory_lock(%s, hashtext('runs'))", (REBUILD_LOCK_CLASS,))
        assert projection_status(ledger, view).rebuilding is not None
        with pytest.raises(RebuildRunning, match="a rebuild of the runs view is already running"):
            rebuild(ledger, RunsView)
    assert projection_status(ledger, view).rebuilding is None
    monkeypatch.setattr(RunsView, "version", 2)
    rebuild(ledger, RunsView)
    status = projection_status(ledger, RunsView(ledger))
    assert (status.version, status.code_version, status.position) == (
        2,
        2,
        ledger.log.head(),
    )
