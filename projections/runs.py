"""Runs view: one row per run — status, trigger, focus, iterations, tool calls, tokens, cost,
its plan's progress —
and what they add up to per agent and day. The focus is kept sealed as the ledger stores it
(``events.sealing``) and opened on read: an erased run's reads ``[erased]``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, ClassVar
from uuid import UUID

import msgspec
from psycopg import Cursor

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger_log import LoggedEvent
from projections.run_row import RunRow
from projections.sqlvalues import text
from projections.view import View

_TERMINAL: dict[type[LedgerEvent], str] = {
    ev.RunCompleted: "completed",
    ev.RunFailed: "failed",
    ev.RunTimedOut: "timed_out",
    ev.RunTerminated: "terminated",
    ev.RunSkipped: "skipped",
}


class RunsView(View):
    name: ClassVar[str] = "runs"
    version: ClassVar[int] = 3
    """2: the focus sealed as in the ledger; 3: the plan's progress (items done, items)."""
    tables: ClassVar[tuple[str, ...]] = ("runs",)
    indexes: ClassVar[tuple[str, ...]] = ("runs_agent", "runs_started")
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (
        ev.RunStarted,
        ev.LLMResponded,
        ev.ToolCallRequested,
        ev.RunInterrupted,
        ev.RunResumed,
        ev.PlanUpdated,
        *_TERMINAL,
    )
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {runs} ("
        " run_id uuid PRIMARY KEY, agent_id text NOT NULL, run_no integer NOT NULL,"
        " trigger text NOT NULL, focus text, status text NOT NULL,"
        " iterations integer NOT NULL DEFAULT 0, tool_calls integer NOT NULL DEFAULT 0,"
        " tokens integer NOT NULL DEFAULT 0, cost_usd double precision NOT NULL DEFAULT 0,"
        " started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms double precision,"
        " error text, position bigint NOT NULL, plan_done integer, plan_items integer)",
        "CREATE INDEX IF NOT EXISTS {runs_agent} ON {runs} (agent_id, started_at)",
        "CREATE INDEX IF NOT EXISTS {runs_started} ON {runs} (started_at)",
    )

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e, pos = logged.event, logged.position
        run = e.originator_id
        if isinstance(e, ev.RunStarted):
            curs.execute(
                self.sql(
                    "INSERT INTO {runs} (run_id, agent_id, run_no, trigger, focus, status,"
                    " started_at, position) VALUES (%s, %s, %s, %s, %s, 'running', %s, %s)"
                    " ON CONFLICT (run_id) DO NOTHING"
                ),
                (
                    run,
                    text(e.agent_id),
                    e.run_no,
                    text(e.trigger),
                    text(self.ledger.sealer.stored(e, "focus")),
                    e.timestamp,
                    pos,
                ),
            )
        elif isinstance(e, ev.LLMResponded):
            curs.execute(
                self.sql(
                    "UPDATE {runs} SET iterations = iterations + 1, tokens = tokens + %s,"
                    " cost_usd = cost_usd + %s, position = %s WHERE run_id = %s"
                ),
                (e.usage.get("total_tokens", 0), e.cost_usd, pos, run),
            )
        elif isinstance(e, ev.ToolCallRequested):
            curs.execute(
                self.sql(
                    "UPDATE {runs} SET tool_calls = tool_calls + 1, position = %s WHERE run_id = %s"
                ),
                (pos, run),
            )
        elif isinstance(e, ev.PlanUpdated):
            done, items = _progress(e.items)
            curs.execute(
                self.sql(
                    "UPDATE {runs} SET plan_done = %s, plan_items = %s, position = %s"
                    " WHERE run_id = %s"
                ),
                (done, items, pos, run),
            )
        elif isinstance(e, ev.RunInterrupted | ev.RunResumed):
            status = "interrupted" if isinstance(e, ev.RunInterrupted) else "running"
            curs.execute(
                self.sql("UPDATE {runs} SET status = %s, position = %s WHERE run_id = %s"),
                (status, pos, run),
            )
        elif type(e) in _TERMINAL:
            error = getattr(e, "error", None) or getattr(e, "reason", None)
            curs.execute(
                self.sql(
                    "UPDATE {runs} SET status = %s, ended_at = %s, error = %s, position = %s,"
                    " duration_ms = extract(epoch FROM (%s - started_at)) * 1000"
                    " WHERE run_id = %s"
                ),
                (_TERMINAL[type(e)], e.timestamp, text(error), pos, e.timestamp, run),
            )

    def of_agent(self, agent_id: str, limit: int = 100, before: int | None = None) -> list[RunRow]:
        """The agent's latest ``limit`` runs (before run number ``before``), newest first."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT run_id, run_no, trigger, focus, status, started_at, ended_at,"
                    " duration_ms, iterations, tool_calls, tokens, cost_usd, error, plan_done,"
                    " plan_items FROM {runs}"
                    " WHERE agent_id = %s AND run_no < %s ORDER BY run_no DESC LIMIT %s"
                ),
                (agent_id, before if before is not None else 2**31 - 1, limit),
            ).fetchall()
        return [msgspec.convert(self._opened(row), RunRow) for row in rows]

    def _opened(self, row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "focus": self.ledger.sealer.open(row["focus"])}

    def per_agent(self) -> list[dict[str, Any]]:
        """Each agent with runs: agent_id, runs, active (running or interrupted), last_run (its
        latest start); by agent id."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, count(*) AS runs,"
                    " count(*) FILTER (WHERE status IN ('running', 'interrupted')) AS active,"
                    " max(started_at) AS last_run FROM {runs} GROUP BY agent_id ORDER BY agent_id"
                )
            ).fetchall()
        return [dict(r) for r in rows]

    def active(self) -> list[dict[str, Any]]:
        """The runs running or interrupted: agent_id, run_no, trigger, focus, status,
        started_at; oldest first."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, run_no, trigger, focus, status, started_at FROM {runs}"
                    " WHERE status IN ('running', 'interrupted') ORDER BY started_at"
                )
            ).fetchall()
        return [self._opened(r) for r in rows]

    def started_since(
        self, since: datetime, agent_ids: Sequence[str] | None = None
    ) -> dict[str, int]:
        """How many runs each agent (of ``agent_ids``, or every one) started at or after
        ``since``."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, count(*) AS n FROM {runs} WHERE started_at >= %s"
                    " AND (%s::text[] IS NULL OR agent_id = ANY(%s)) GROUP BY agent_id"
                ),
                (since, agent_ids, agent_ids),
            ).fetchall()
        return {row["agent_id"]: row["n"] for row in rows}

    def daily(self, since: datetime) -> list[DayOfAgent]:
        """Per agent and UTC day, the runs started at or after ``since`` (a run counts on the
        day it started, with all its tool calls, tokens and cost, as the daily budget does)."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, (started_at AT TIME ZONE 'UTC')::date AS day,"
                    " count(*) AS runs, sum(tool_calls)::bigint AS tool_calls,"
                    " sum(tokens)::bigint AS tokens, sum(cost_usd) AS cost_usd"
                    " FROM {runs} WHERE started_at >= %s GROUP BY agent_id, day"
                    " ORDER BY day, agent_id"
                ),
                (since,),
            ).fetchall()
        return [msgspec.convert(row, DayOfAgent) for row in rows]

    def costs_since(self, since: datetime) -> list[RunCost]:
        """What the runs started at or after ``since`` cost: the ended ones summed per agent,
        each unfinished one on its own (its cost still grows), for budgets over several
        agents."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, NULL::uuid AS run_id, sum(cost_usd) AS cost_usd FROM {runs}"
                    " WHERE started_at >= %s AND ended_at IS NOT NULL GROUP BY agent_id"
                    " UNION ALL SELECT agent_id, run_id, cost_usd FROM {runs}"
                    " WHERE started_at >= %s AND ended_at IS NULL"
                ),
                (since, since),
            ).fetchall()
        return [msgspec.convert(row, RunCost) for row in rows]


def _progress(items: Any) -> tuple[int | None, int | None]:
    """(items done, items) of a plan; (None, None) when it reads erased (not a list)."""
    if not isinstance(items, list):
        return None, None
    done = sum(1 for i in items if isinstance(i, dict) and i.get("status") == "done")
    return done, len(items)


class RunCost(msgspec.Struct, frozen=True):
    """The cost of an agent's runs (``run_id`` None: its ended runs together) or of one run."""

    agent_id: str
    run_id: UUID | None
    cost_usd: float


class DayOfAgent(msgspec.Struct, frozen=True):
    agent_id: str
    day: date
    runs: int
    tool_calls: int
    tokens: int
    cost_usd: float
