"""Erasure on the real PostgreSQL, as an operator runs it: after ``owlclaw erase`` and a
CHECKPOINT, no plaintext of any content kind is in any file under the PostgreSQL data directory
(erased or not: content is only ever written sealed), the erased content reads ``[erased]``
through the ledger, the views, MEMORY.md, recall and replay, its vector row is gone, a new
evidence bundle holds none of it, and ``owlclaw verify`` still passes. Content not erased still
reads as it was. A schedule's focus (in the ledger, the schedules view, the timer table and the
run it fires) is sealed too, and reads ``[erased]`` once its agent is erased."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from events.sealing import ERASED_TEXT, ERASED_VALUE
from owlclaw.database import Database
from owlclaw.timers.registrations import TimerRegistrations
from projections import (
    AuditView,
    MemoryStore,
    MemoryView,
    ProjectionRunner,
    RunsView,
    SchedulesView,
)
from projections.embedders import Embedder
from projections.memory_files import render_memory_files
from tests.cli import owlclaw

pytestmark = pytest.mark.integration

AGENT = "keeper"
PLANNER = "planner"
"""The agent whose schedule is recorded, and which is erased whole."""
KINDS = ("focus", "payload", "message", "answer", "arguments", "result", "memory")


@dataclass
class Recorded:
    run_id: uuid.UUID
    run_no: int
    memory_id: uuid.UUID
    secrets: dict[str, str]
    """Content kind -> a plaintext found nowhere else."""


def record_run(ledger: Ledger, tag: str) -> Recorded:
    """One run holding a distinct secret in every content kind."""
    secrets = {kind: f"{kind}-{tag}-{uuid.uuid4().hex[:12]}" for kind in KINDS}
    agent = ledger.register_agent(AGENT)
    queued = agent.queue_run("webhook", secrets["focus"], {"note": secrets["payload"]})
    run = Run.start(AGENT, queued)
    run.record(ev.LLMResponded, model="scripted/x", message={"content": secrets["message"]})
    run.record(
        ev.ToolCallRequested, call_id="c1", tool="lookup", arguments={"q": secrets["arguments"]}
    )
    run.record(ev.ToolCallSucceeded, call_id="c1", tool="lookup", result={"a": secrets["result"]})
    memory_id = uuid.uuid4()
    run.record(ev.MemoryRemembered, agent_id=AGENT, memory_id=memory_id, content=secrets["memory"])
    run.end(ev.RunCompleted, answer=secrets["answer"])
    ledger.seal(agent, run)
    ledger.append(agent, run)
    return Recorded(run.id, queued.run_no, memory_id, secrets)


@dataclass
class Scheduled:
    schedule_id: str
    fired_run_id: uuid.UUID
    focus: str
    state_secrets: list[str]
    """An approval's arguments and a sub-agent's answer: the agent's state (and so its
    snapshots, taken every 2 events here) holds them as well."""


def record_schedule(ledger: Ledger) -> Scheduled:
    """A run of PLANNER asks for an approval, gets a sub-agent's answer and schedules a one-off
    with a secret focus, and the timer fires it."""
    focus, arguments, answer = (
        f"{kind}-{uuid.uuid4().hex[:12]}" for kind in ("schedule-focus", "approval", "sub-answer")
    )
    agent = ledger.register_agent(PLANNER)
    queued = agent.queue_run("webhook", "plan the week")
    owner = Run.start(PLANNER, queued)
    ledger.append(agent, owner)
    agent.request_approval(owner.id, "c1", "pay", {"to": arguments}, "ask", [], 3600)
    agent.record(
        ev.SubAgentFinished,
        spawn_id="sp-1",
        run_id=owner.id,
        call_id="c2",
        child_agent_id="helper",
        child_run_id=uuid.uuid4(),
        wait=True,
        status="completed",
        answer=answer,
    )
    schedule = agent.record(
        ev.ScheduleRequested,
        schedule_id="s-1",
        kind="once",
        focus=focus,
        owner_run_id=queued.run_id,
        delay_seconds=60,
        agent_id=PLANNER,
    )
    owner.end(ev.RunCompleted, answer="scheduled")
    ledger.seal(agent, owner)
    ledger.append(agent, owner)
    verdict, _, fired = agent.receive_fire("s-1", schedule.timestamp + timedelta(seconds=60))
    assert verdict == "fire" and fired is not None
    run = Run.start(PLANNER, fired)
    ledger.append(agent, run)
    return Scheduled("s-1", fired.run_id, focus, [arguments, answer])


def files_holding(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """Each needle -> the files under ``root`` whose bytes contain it."""
    found: dict[str, list[str]] = {n: [] for n in needles}
    encoded = {n: n.encode() for n in needles}
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for needle, raw in encoded.items():
            if raw in data:
                found[needle].append(str(path.relative_to(root)))
    return {n: paths for n, paths in found.items() if paths}


@dataclass
class Scenario:
    ledger: Ledger
    db_url: str
    erased_run: Recorded
    """Erased with ``--run``: all its content but its memory (which has a key of its own)."""
    erased_memory: Recorded
    """Its memory erased with ``--memory``; the rest of it kept."""
    kept: Recorded
    plain: Recorded
    """Recorded with ``[ledger] encrypt = false``: the scan's own check, it finds plaintext."""
    scheduled: Scheduled
    """PLANNER's schedule; PLANNER erased with ``--agent``."""
    leaks: dict[str, list[str]]
    memory_md: str
    views: Views
    bundle: str
    replay: str
    verify: dict[str, object]


def _env(db: Database, data_dir: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("OWLCLAW_")},
        "OWLCLAW_DATA_DIR": str(data_dir),
        "OWLCLAW_DATABASE_URL": db.url,
        "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
    }


Views = tuple[MemoryView, RunsView, AuditView, SchedulesView, TimerRegistrations]


def _views(ledger: Ledger, embedder: Embedder) -> Views:
    return (
        MemoryView(ledger, embedder=embedder),
        RunsView(ledger),
        AuditView(ledger),
        SchedulesView(ledger),
        TimerRegistrations(ledger, records=False),
    )


@pytest.fixture(scope="module")
def scenario(
    pg_server: Database, local_embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    tmp = tmp_path_factory.mktemp("erasure")
    env = _env(db, tmp / "data")
    try:
        with Ledger(db.url, snapshot_interval=2) as writer:
            erased_run, erased_memory, kept = (record_run(writer, t) for t in ("r", "m", "k"))
            with Ledger(db.url, encrypt=False) as plaintext:
                plain = record_run(plaintext, "p")
            scheduled = record_schedule(writer)
            for view in _views(writer, local_embedder):
                view.create_table()
                ProjectionRunner(writer, view).catch_up()
        for args in (
            ("--run", str(erased_run.run_id), "--reason", "GDPR art. 17 request 1"),
            ("--memory", str(erased_memory.memory_id), "--reason", "GDPR art. 17 request 2"),
            ("--agent", PLANNER, "--reason", "GDPR art. 17 request 3"),
        ):
            done = owlclaw(env, "erase", *args, "--by", "dpo", cwd=tmp)
            assert done.returncode == 0, done.stderr
        # read by a process that did not hold the keys (one that did stops within 5 s)
        with Ledger(db.url) as ledger:
            views = _views(ledger, local_embedder)
            for view in views:
                ProjectionRunner(ledger, view).catch_up()
            memory_md = (tmp / "data" / "memory" / AGENT / "MEMORY.md").read_text()
            assert owlclaw(env, "keys", "init", cwd=tmp).returncode == 0
            bundle = owlclaw(env, "export", AGENT, cwd=tmp)
            assert bundle.returncode == 0, bundle.stderr
            replay = owlclaw(env, "replay", AGENT, str(erased_run.run_no), cwd=tmp)
            assert replay.returncode == 0, replay.stderr
            verify = owlclaw(env, "verify", "--json", cwd=tmp)
            assert verify.returncode == 0, verify.stdout + verify.stderr
            with psycopg.connect(db.url, autocommit=True) as conn:
                conn.execute("CHECKPOINT")
                row = conn.execute("SHOW data_directory").fetchone()
            assert row is not None
            recorded = (erased_run, erased_memory, kept, plain)
            needles = [s for r in recorded for s in r.secrets.values()]
            needles += [scheduled.focus, *scheduled.state_secrets]
            yield Scenario(
                ledger,
                db.url,
                erased_run,
                erased_memory,
                kept,
                plain,
                scheduled,
                files_holding(Path(row[0]), needles),
                memory_md,
                views,
                bundle.stdout,
                replay.stdout,
                json.loads(verify.stdout),
            )
    finally:
        pg_server.drop_database(name)


def _fields(ledger: Ledger, recorded: Recorded) -> dict[str, object]:
    """Each content kind as the ledger reads it back."""
    started, responded, requested, succeeded, memory, completed = ledger.stream(recorded.run_id)
    assert isinstance(started, ev.RunStarted) and isinstance(responded, ev.LLMResponded)
    assert isinstance(requested, ev.ToolCallRequested)
    assert isinstance(succeeded, ev.ToolCallSucceeded)
    assert isinstance(memory, ev.MemoryRemembered) and isinstance(completed, ev.RunCompleted)
    return {
        "focus": started.focus,
        "payload": started.payload,
        "message": responded.message,
        "answer": completed.answer,
        "arguments": requested.arguments,
        "result": succeeded.result,
        "memory": memory.content,
    }


@pytest.mark.parametrize("kind", KINDS)
def test_no_plaintext_of_any_kind_is_under_the_data_directory(
    scenario: Scenario, kind: str
) -> None:
    for recorded in (scenario.erased_run, scenario.erased_memory, scenario.kept):
        secret = recorded.secrets[kind]
        assert secret not in scenario.leaks, f"{kind} in {scenario.leaks[secret]}"
        assert secret not in scenario.bundle
    assert scenario.plain.secrets[kind] in scenario.leaks  # what the scan finds when written


@pytest.mark.parametrize("kind", KINDS[:-1])
def test_a_run_erased_reads_erased_in_each_kind_and_one_kept_reads_as_it_was(
    scenario: Scenario, kind: str
) -> None:
    erased = _fields(scenario.ledger, scenario.erased_run)[kind]
    assert erased in (ERASED_TEXT, ERASED_VALUE)
    kept = _fields(scenario.ledger, scenario.kept)[kind]
    assert scenario.kept.secrets[kind] in json.dumps(kept)
    assert scenario.erased_run.secrets[kind] not in scenario.replay


def test_a_run_erased_shows_erased_in_the_runs_view_and_replay(scenario: Scenario) -> None:
    runs = scenario.views[1]
    focus = {r.run_no: r.focus for r in runs.of_agent(AGENT)}
    assert focus[scenario.erased_run.run_no] == ERASED_TEXT
    assert focus[scenario.kept.run_no] == scenario.kept.secrets["focus"]
    assert ERASED_TEXT in scenario.replay


def test_a_memory_erased_leaves_the_ledger_view_vectors_and_memory_md(
    scenario: Scenario, tmp_path: Path
) -> None:
    fields = _fields(scenario.ledger, scenario.erased_memory)
    assert fields["memory"] == ERASED_TEXT
    assert fields["focus"] == scenario.erased_memory.secrets["focus"]  # the rest of its run kept
    memory_view = scenario.views[0]
    with memory_view.transaction(commit=False) as curs:
        ids = [
            r["memory_id"]
            for r in curs.execute(memory_view.sql("SELECT memory_id FROM {memories}"))
        ]
    assert scenario.erased_memory.memory_id not in ids
    assert scenario.kept.memory_id in ids
    rendered, _ = render_memory_files(memory_view, AGENT, tmp_path)
    for text in (scenario.memory_md, rendered.read_text()):
        assert scenario.erased_memory.secrets["memory"] not in text
        assert scenario.kept.secrets["memory"] in text
    recalled = MemoryStore(memory_view).recall(AGENT, scenario.kept.secrets["memory"], limit=5)
    contents = [m.content for m in recalled.memories]
    assert scenario.kept.secrets["memory"] in contents
    assert scenario.erased_memory.secrets["memory"] not in contents


def test_the_chains_still_verify_and_the_erasures_are_recorded(scenario: Scenario) -> None:
    assert scenario.verify["ok"] is True
    assert scenario.ledger.chains.verify().ok
    erasures = [
        e for e in scenario.ledger.stream(scenario.ledger.load_agent(AGENT).id)
        if isinstance(e, ev.DataErased)
    ]  # fmt: skip
    assert [(e.kind, e.by) for e in erasures] == [("run", "dpo"), ("memory", "dpo")]
    planner = scenario.ledger.load_agent(PLANNER)
    assert [e.kind for e in scenario.ledger.stream(planner.id) if isinstance(e, ev.DataErased)] == [
        "agent"
    ]
    assert erasures[1].memory_ids == [scenario.erased_memory.memory_id]
    assert erasures[0].reason == "GDPR art. 17 request 1"


def test_a_schedule_focus_is_sealed_and_reads_erased_once_its_agent_is_erased(
    scenario: Scenario,
) -> None:
    scheduled = scenario.scheduled
    assert scheduled.focus not in scenario.leaks, scenario.leaks.get(scheduled.focus)
    assert scheduled.focus not in scenario.bundle
    requested = next(
        e
        for e in scenario.ledger.stream(scenario.ledger.load_agent(PLANNER).id)
        if isinstance(e, ev.ScheduleRequested)
    )
    assert requested.focus == ERASED_TEXT
    schedules = scenario.views[3]
    listed = {r["schedule_id"]: r for r in schedules.listing(PLANNER, every=True)}
    assert listed[scheduled.schedule_id]["focus"] == ERASED_TEXT
    started = scenario.ledger.stream(scheduled.fired_run_id)[0]
    assert isinstance(started, ev.RunStarted) and started.trigger == "schedule_once"
    assert started.focus == ERASED_TEXT
    runs = {r.run_id: r.focus for r in scenario.views[1].of_agent(PLANNER)}
    assert runs[scheduled.fired_run_id] == ERASED_TEXT


def test_agent_snapshots_hold_no_approval_arguments_or_sub_agent_answers(
    scenario: Scenario,
) -> None:
    ledger = scenario.ledger
    planner = ledger.load_agent(PLANNER)
    with psycopg.connect(scenario.db_url) as conn:
        snapshots = conn.execute(
            "SELECT count(*) FROM ledger_snapshots WHERE originator_id = %s", (planner.id,)
        ).fetchone()
    assert snapshots is not None and snapshots[0] > 0
    for secret in scenario.scheduled.state_secrets:
        assert secret not in scenario.leaks, scenario.leaks.get(secret)
        assert secret not in scenario.bundle
    (approval,) = planner.state.approvals.values()
    assert approval.arguments == ERASED_VALUE
    assert planner.state.spawns["sp-1"].answer == ERASED_TEXT
