"""The golden ledger (tests/golden_ledger.py), written by an earlier OwlClaw, loads into a fresh
database, and today's code opens it, verifies it, reads every event, replays every ended run and
projects it. Every later release must pass this test with the file unchanged: when an event class
changes, an upcaster makes the old events load, the golden file stays as it was written."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from events.catalog import EVENT_TYPES, LedgerEvent
from events.codec import MsgspecMapper
from events.ledger_format import running_format
from events.streams import agent_stream_id, run_stream_id
from owlclaw.app import load_app
from owlclaw.audit.chains import verify_agent
from owlclaw.audit.verify import replay_run
from owlclaw.compose.read import configured_views
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.runtime.app_code import AppCode
from owlclaw.tools.stats import tool_stats
from projections import (
    AuditView,
    MemoryStore,
    MemoryView,
    ProjectionRunner,
    RunsView,
    SchedulesView,
)
from projections.embedders import Embedder
from projections.status import projection_status
from tests.cli import owlclaw_on
from tests.golden_ledger import APP, LEDGER_FILE, RECORDED_APP, load

pytestmark = pytest.mark.integration

EVENTS = 119
EVENT_COUNTS = {
    "AgentRegistered": 2,
    "ApprovalGranted": 1,
    "ApprovalRequested": 2,
    "DecisionLogged": 2,
    "IdentityLoaded": 2,
    "LLMResponded": 22,
    "MemoryAdded": 3,
    "MemoryForgotten": 1,
    "MemoryRemembered": 3,
    "RunCompleted": 7,
    "RunParked": 3,
    "RunQueued": 8,
    "RunResumed": 2,
    "RunSealed": 7,
    "RunStarted": 8,
    "ScheduleCancelled": 1,
    "ScheduleRequested": 3,
    "SubAgentCharged": 1,
    "SubAgentFinished": 1,
    "SubAgentSpawned": 1,
    "TimerFired": 1,
    "ToolCallRequested": 15,
    "ToolCallSucceeded": 15,
    "VisibleToolsResolved": 8,
}
"""What the golden ledger holds, by event type."""


@pytest.fixture(scope="module")
def golden(pg_server: Database) -> Iterator[Database]:
    """A database holding the golden ledger, shared by this module's tests (none writes)."""
    name = f"golden_{uuid.uuid4().hex[:8]}"
    db = pg_server.create_database(name)
    assert load(db.url) == EVENTS
    yield db
    pg_server.drop_database(name)


def local_app(app_dir: str) -> Path:
    """Where the app the golden ledger names is in this repository."""
    return APP / Path(app_dir).relative_to(RECORDED_APP)


def test_the_golden_ledger_opens_with_today_s_format_and_its_chains_verify(
    golden: Database,
) -> None:
    written = json.loads(LEDGER_FILE.read_text(encoding="utf-8").splitlines()[0])
    with Ledger(golden.url) as ledger:  # opening it records today's format over the one written
        report = verify_agent(ledger)
        assert ledger.agent_ids() == ["golden", "golden.researcher-7bd42091"]
    assert running_format().format >= written["format"]
    assert (report.ok, report.events, report.sealed_runs, report.breaks) == (True, EVENTS, 7, [])
    assert report.mismatches == [] and report.unreadable == []
    with psycopg.connect(golden.url) as conn:
        [(recorded,)] = conn.execute("SELECT format FROM ledger_events_format").fetchall()
    assert recorded == running_format().format


def test_every_event_decodes_as_today_s_classes(golden: Database) -> None:
    with Ledger(golden.url) as ledger:
        logged, after = [], 0
        while page := ledger.log.read(after):
            logged += page
            after = page[-1].position
    assert [e.position for e in logged] == list(range(1, EVENTS + 1))
    assert Counter(type(e.event).__name__ for e in logged) == EVENT_COUNTS
    assert all(isinstance(e.event, ev.LedgerEvent) for e in logged)


def test_every_ended_run_replays_as_recorded(golden: Database) -> None:
    replayed = []
    with Ledger(golden.url) as ledger:
        for agent_id in ledger.agent_ids():
            state = ledger.load_agent(agent_id).state
            app = load_app(local_app(state.app_dir))
            registry = AppCode(30.0).load(app.handlers) if app.handlers else None
            for run_no in range(1, state.run_count + 1):
                events = ledger.stream(run_stream_id(agent_id, run_no))
                if not any(isinstance(e, ev.RunEnded) for e in events):
                    continue
                report = replay_run(ledger, agent_id, run_no, app=app, registry=registry)
                assert report.matched, (agent_id, run_no, [str(d) for d in report.differences])
                replayed.append((agent_id, run_no))
    assert len(replayed) == 7  # the golden agent's seven runs but the parked one, and its child


def test_the_cli_verifies_and_replays_the_golden_ledger(golden: Database, tmp_path: Path) -> None:
    verified = owlclaw_on(golden, "verify", cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert f"ok: {EVENTS} events in" in verified.stdout
    replayed = owlclaw_on(
        golden, "replay", "golden", "4", "--verify", "--app", str(APP), cwd=tmp_path
    )
    assert replayed.returncode == 0, replayed.stderr
    assert "replay matches" in replayed.stdout


def test_the_views_catch_up_over_the_golden_ledger(
    golden: Database, local_embedder: Embedder, tmp_path: Path
) -> None:
    config = OwlClawConfig(data_dir=str(tmp_path))
    with Ledger(golden.url) as ledger:
        views = [v.open(ledger) for v in configured_views(config, local_embedder)]
        for view in views:
            ProjectionRunner(ledger, view).catch_up()
            status = projection_status(ledger, view)
            assert (status.lag_events, status.parked_count) == (0, 0), status
        runs = next(v for v in views if isinstance(v, RunsView))
        golden_runs = runs.of_agent("golden")
        assert [r.status for r in golden_runs].count("completed") == 6
        assert [r.run_no for r in golden_runs if r.status != "completed"] == [7]  # parked
        assert [(r["agent_id"], r["runs"]) for r in runs.per_agent()] == [
            ("golden", 7),
            ("golden.researcher-7bd42091", 1),
        ]
        schedules = next(v for v in views if isinstance(v, SchedulesView))
        listed = {s["focus"]: s["status"] for s in schedules.listing("golden", every=True)}
        assert listed == {
            "re-check ACME": "completed",
            "morning review": "requested",
            "pre-close check": "cancelled",
        }
        audit = next(v for v in views if isinstance(v, AuditView))
        calls = {s.tool: (s.calls, s.succeeded) for s in tool_stats(audit, "golden")}
        assert calls == {
            "cancel_schedule": (1, 1),
            "entry_check": (2, 2),
            "forget": (1, 1),
            "log_decision": (1, 1),
            "place_order": (1, 1),
            "query_state": (1, 1),
            "remember": (3, 3),
            "schedule_cron": (1, 1),
            "schedule_once": (2, 2),
            "spawn_agent": (1, 1),
        }
        memory = next(v for v in views if isinstance(v, MemoryView))
        recalled = MemoryStore(memory).recall("golden", "how large may a position be", 5)
        assert [m.content for m in recalled.memories] == [
            "Keep each position under 5% of the book.",
            "ACME is too volatile to enter at the open.",
        ]
    memory_md = (tmp_path / "memory" / "golden" / "MEMORY.md").read_text()
    assert "Keep each position under 5%" in memory_md and "ACME is too volatile" in memory_md
    assert "A note for today only." not in memory_md  # forgotten


class _ScheduleCancelledV2(LedgerEvent, frozen=True, kw_only=True):
    """ScheduleCancelled as a later release might change it: ``by`` renamed ``cancelled_by``,
    with the upcaster that release must ship (not registered: the name starts with ``_``)."""

    stream: ClassVar[ev.Stream] = "agent"
    class_version: ClassVar[int] = 2
    schedule_id: str
    reason: str = ""
    cancelled_by: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["cancelled_by"] = state.pop("by") or "unknown"


def test_a_changed_event_class_reads_the_golden_events_through_its_upcaster(
    golden: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger(golden.url) as ledger:
        stored = ledger.database.recorder.select_events(agent_stream_id("golden"))
    monkeypatch.setitem(EVENT_TYPES, "ScheduleCancelled", _ScheduleCancelledV2)
    mapper = MsgspecMapper()
    events = [mapper.to_domain_event(s) for s in stored]
    [cancelled] = [e for e in events if isinstance(e, _ScheduleCancelledV2)]
    assert (cancelled.cancelled_by, cancelled.originator_version) == ("agent", 10)
