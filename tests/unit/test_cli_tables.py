"""The CLI's tables in an 80-column terminal: no line is wider, and what a user copies into
another command (a schedule id, an agent id, a run number, a log position, a tool name, an eval
id) stays whole on one line; only free text folds."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, tzinfo
from uuid import UUID

import pytest
from rich.console import Console, RenderableType

from events import Ledger
from events import catalog as ev
from events.agent_state import ActiveSchedule
from owlclaw.audit.as_of import PastMemory
from owlclaw.audit.evals import EvalComparison, EvalReport
from owlclaw.audit.evidence.export import select_runs
from owlclaw.audit.ledger_page import ledger_page
from owlclaw.audit.redecide import ReDecision, Step, StepDecision
from owlclaw.cli import audit, evals, replay, status, tables, tools
from owlclaw.cli import ledger as ledger_commands
from owlclaw.cli import schedules as schedules_commands
from owlclaw.reports.relative_time import relative
from owlclaw.tools.stats import ToolStats
from projections.memory import ArchivedMemory
from projections.relevance import Memory
from tests.sample_run import AGENT_ID, record_sample_run

NOW = datetime.now(UTC)
FOCUS = "check entry opportunities before the market opens, then report what changed"


class FrozenAtNow(datetime):
    @classmethod
    def now(cls, tz: tzinfo | None = None) -> FrozenAtNow:
        return cls.fromtimestamp(NOW.timestamp(), tz)


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """``relative`` reads the clock: the tables are rendered at NOW however long after this
    module was imported (a loaded run reached them 9 minutes later)."""
    monkeypatch.setitem(relative.__globals__, "datetime", FrozenAtNow)


def console() -> Console:
    return Console(file=io.StringIO(), width=80, record=True)


def rendered(*renderables: RenderableType) -> list[str]:
    shown = console()
    for renderable in renderables:
        shown.print(renderable)
    return lines_of(shown)


def lines_of(shown: Console) -> list[str]:
    lines = shown.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    return lines


def line_with(lines: list[str], *values: str) -> str:
    """The first line showing all of ``values`` whole."""
    found = [line for line in lines if all(value in line for value in values)]
    assert found, f"no line has all of {values}:\n" + "\n".join(lines)
    return found[0]


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_the_ledger_names_each_run_by_the_number_replay_and_export_take(ledger: Ledger) -> None:
    record_sample_run(ledger)
    shown = console()
    shown.print(ledger_commands.ledger_table(ledger_page(ledger, AGENT_ID, 0, None)))
    lines = lines_of(shown)
    for h in ledger.agent_history(AGENT_ID):
        [row] = [line for line in lines if line.startswith(f"│ {h.position} ")]
        assert type(h.event).__name__ in row, row
    stream = cells(line_with(lines, "RunStarted"))[1]
    run = stream.removeprefix("run ")
    assert select_runs(AGENT_ID, 1, [], [run]) == [1]  # `owlclaw export --run` takes it


SCHEDULES = [
    {
        "schedule_id": "sch_3f9a0c1b2d4e",
        "agent_id": "research-assistant",
        "kind": "cron",
        "cron": "0 9 * * 1-5",
        "on_missed": "all",
        "focus": FOCUS,
        "next_fire_at": NOW + timedelta(hours=3, minutes=1),
        "status": "registered",
        "backend": "builtin",
        "misses": 2,
        "last_outcome": "missed: the server was down at fire time",
    },
    {
        "schedule_id": "sch_77aa0c1b2d4e",
        "agent_id": "demo-trader",
        "kind": "once",
        "cron": None,
        "on_missed": "one",
        "focus": "recheck [true]",  # not markup
        "next_fire_at": None,
        "status": "completed",
        "backend": "hatchet",
        "misses": 0,
        "last_outcome": "fired",
    },
]


@pytest.mark.parametrize("agent", [None, "research-assistant"])
def test_schedules_keep_their_ids_agents_cron_and_status_whole(agent: str | None) -> None:
    lines = rendered(schedules_commands.schedules_table(agent, SCHEDULES))
    first = line_with(lines, "sch_3f9a0c1b2d4e", "0 9 * * 1-5", "registered")
    assert line_with(lines, "sch_77aa0c1b2d4e", "once", "completed", "recheck [true]")
    assert line_with(lines, "research-assistant")  # under its schedule, or in the title
    assert line_with(lines, "in 3 h") and line_with(lines, "2 missed")
    assert line_with(lines, "on missed: all") and line_with(lines, "on missed: one")
    assert "check entry" in first  # the focus folds beside them


def test_status_keeps_agent_ids_and_times_whole_and_folds_app_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report = {
        "server": {"url": "http://127.0.0.1:8765", "running": False},
        "database": {"head": 123_460},
        "pending_timers": 2,
        "registered_agents": 2,
        "agents": [
            {
                "agent_id": "research-assistant",
                "runs": 12_345,
                "runs_today": 120,
                "active": 1,
                "last_run": NOW - timedelta(minutes=42, seconds=5),
                "next_timer": NOW + timedelta(hours=23, minutes=5),
                "app_error": "SyntaxError: invalid syntax (handlers.py, line 12)",
            },
            {"agent_id": "demo-trader", "runs": 3, "runs_today": 0, "active": 0},
        ],
        "projections": [
            {"name": "tool_calls", "position": 123_456, "lag_events": 4, "lag_seconds": 0.25}
        ],
    }
    report["agents"][1] |= {"last_run": None, "next_timer": None}
    monkeypatch.setattr(status, "out", shown := console())
    status._print_status(report)
    lines = lines_of(shown)
    assert line_with(lines, "research-assistant", "12345", "120", "42 min ago")
    assert line_with(lines, "in 23 h") and line_with(lines, "demo-trader")
    assert line_with(lines, "tool_calls", "123456")
    assert "line 12)" in "\n".join(lines)


def test_tool_names_stay_whole_and_errors_are_listed_under_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stats = [
        ToolStats(
            "fetch_market_snapshot",
            1234,
            1190,
            {"INVALID_ARGUMENTS": 20, "TOOL_FAILED": 14},
            10,
            12.3,
            1145.6,
            2,
        ),
        ToolStats("schedule_cron", 3, 3, {}, 0, 1.0, 1.2, 0),
    ]
    monkeypatch.setattr(tools, "out", shown := console())
    tools.print_stats_table("demo-trader", stats, ["schedule_cron"])
    lines = lines_of(shown)
    assert line_with(lines, "fetch_market_snapshot", "1234", "1190", "44", "1145.6")
    assert line_with(lines, "schedule_cron", "1.2")
    errors = "errors of fetch_market_snapshot: INVALID_ARGUMENTS 20, TOOL_FAILED 14, timed out 10"
    assert errors in " ".join(line.strip() for line in lines)


def eval_report(eval_id: str, model: str) -> EvalReport:
    report = EvalReport(eval_id, "demo-trader", model, {})
    report.runs = [
        ev.EvalRunCompared(
            originator_id=UUID(int=n),
            originator_version=n + 1,
            timestamp=NOW,
            run_no=n,
            outcome=outcome,
            decisions=3,
            same=2,
            recorded_tokens=1000,
            candidate_tokens=1234,
            recorded_cost_usd=0.0125,
            candidate_cost_usd=0.00075,
        )
        for n, outcome in enumerate(("identical", "different", "new_tool", "refused"), 1)
    ]
    return report


def test_an_eval_and_a_comparison_keep_ids_and_figures_whole() -> None:
    a = eval_report("3f9a0c1b2d4e", "openai/gpt-4o-mini")
    b = eval_report("77aa0c1b2d4e", "anthropic/claude-3-5-haiku-20241022")
    lines = rendered(evals.eval_table(a), evals.comparison_table(EvalComparison.of(a, b)))
    assert line_with(lines, "4", "1", "75.0%")
    assert line_with(lines, "-0.047000")  # cost Δ of 4 runs
    assert line_with(lines, "┃", "3f9a0c1b2d4e", "77aa0c1b2d4e")
    assert line_with(lines, "openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-20241022")


def test_schedules_of_a_past_moment_keep_ids_and_times_whole() -> None:
    schedules = {
        "sch_3f9a0c1b2d4e": ActiveSchedule(
            "cron", FOCUS, cron="*/15 9-17 * * 1-5", last_fire_time=NOW - timedelta(hours=1)
        ),
        "sch_77aa0c1b2d4e": ActiveSchedule("once", "recheck"),
    }
    lines = rendered(audit.schedules_then_table(schedules))
    last = (NOW - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert line_with(lines, "sch_3f9a0c1b2d4e", "*/15 9-17 * * 1-5", last)
    assert line_with(lines, "sch_77aa0c1b2d4e", "once")


def test_memories_fold_their_content_and_model_beside_whole_dates() -> None:
    held = [
        PastMemory(
            UUID("5f1c2d3e-0000-4000-8000-000000000001"),
            FOCUS,
            ["market", "lesson"],
            NOW,
            UUID(int=1),
            42,
            "sentence-transformers/all-MiniLM-L6-v2",
            False,
        )
    ]
    lines = rendered(audit.memories_then_table(held))
    assert line_with(lines, NOW.strftime("%Y-%m-%d %H:%M:%S"), "5f1c2d3e")
    assert line_with(lines, "all-MiniLM-L6-v2")


def test_recalled_memories_and_re_decided_steps_fold_only_their_text() -> None:
    memory = Memory(UUID(int=7), FOCUS, ["market", "lesson"], NOW, 0.812, 0.731, 0.9)
    report = ReDecision("demo-trader", 12, str(UUID(int=3)), "anthropic/claude-3-5-haiku-20241022")
    report.steps = [
        Step(
            1,
            StepDecision((("fetch_market_snapshot", '{"symbol": "AAPL"}'),)),
            StepDecision(answer=FOCUS),
        ),
        Step(12, None, StepDecision(answer="done"), branch=True),
    ]
    lines = rendered(
        tables.recall_table("demo-trader recalls: 'market crash'", [memory]),
        replay.redecision_table(report),
    )
    assert line_with(lines, "0.731", "0.812", "0.900", NOW.strftime("%Y-%m-%d"))
    assert line_with(lines, "12 (branch)", "different")


def test_archived_memories_keep_their_id_and_dates_whole() -> None:
    archived = ArchivedMemory(
        memory_id=UUID(int=7),
        content=FOCUS,
        tags=["ops"],
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        last_recalled=None,
        archived_at=datetime(2026, 4, 1, tzinfo=UTC),
        reason="not recalled for 90 days",
    )
    lines = rendered(
        tables.archived_table(
            "demo-trader: 1 archived memories",
            [archived],
            lambda m: (m.archived_at or NOW) + timedelta(days=365),
        )
    )
    assert line_with(lines, str(UUID(int=7)), "remembered 2026-01-01")
    assert line_with(lines, "recalled   never")
    assert line_with(lines, "deleted    2027-04-01")
