"""Audit view: one row per tool call — arguments, outcome, duration, result size and whether the
model saw it truncated, the tokens and cost of the LLM response that asked for it, the decision
type of log_decision calls, and for a call that waited for approval: why, who answered, how,
and how long it waited; and per tool, what became of an agent's calls (``tool_stats``).
Arguments and results are kept sealed as the ledger stores them (``events.sealing``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

import msgspec
from psycopg import Cursor

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger_log import LoggedEvent
from projections.sqlvalues import jsonb, text
from projections.view import View


class AuditView(View):
    name: ClassVar[str] = "audit"
    version: ClassVar[int] = 2
    """2: arguments and results sealed as in the ledger."""
    tables: ClassVar[tuple[str, ...]] = ("audit_tool_calls", "audit_run_context")
    indexes: ClassVar[tuple[str, ...]] = ("audit_tool_calls_agent",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (
        ev.RunStarted,
        ev.LLMResponded,
        ev.ToolCallRequested,
        ev.ToolCallDenied,
        ev.ToolCallRejected,
        ev.ToolCallSucceeded,
        ev.ToolCallFailed,
        ev.ToolCallTimedOut,
        ev.ToolOutcomeUnknown,
        ev.DecisionLogged,
        ev.ApprovalRequested,
        ev.ApprovalGranted,
        ev.ApprovalDenied,
        ev.ApprovalExpired,
    )
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {audit_tool_calls} ("
        " run_id uuid NOT NULL, call_id text NOT NULL, agent_id text, tool text NOT NULL,"
        " arguments jsonb, status text NOT NULL, result jsonb, error text, error_code text,"
        " retryable boolean, duration_ms double precision, tokens integer,"
        " cost_usd double precision, decision_type text, requested_at timestamptz,"
        " finished_at timestamptz, position bigint NOT NULL, PRIMARY KEY (run_id, call_id))",
        "ALTER TABLE {audit_tool_calls} ADD COLUMN IF NOT EXISTS result_bytes bigint,"
        " ADD COLUMN IF NOT EXISTS truncated boolean",
        "ALTER TABLE {audit_tool_calls} ADD COLUMN IF NOT EXISTS approval_id text,"
        " ADD COLUMN IF NOT EXISTS approval_reason text,"
        " ADD COLUMN IF NOT EXISTS approval_status text,"
        " ADD COLUMN IF NOT EXISTS approved_by text, ADD COLUMN IF NOT EXISTS approval_note text,"
        " ADD COLUMN IF NOT EXISTS approval_requested_at timestamptz,"
        " ADD COLUMN IF NOT EXISTS approval_answered_at timestamptz,"
        " ADD COLUMN IF NOT EXISTS approval_wait_ms double precision",
        "CREATE INDEX IF NOT EXISTS {audit_tool_calls_agent} ON {audit_tool_calls}"
        " (agent_id, requested_at)",
        "CREATE TABLE IF NOT EXISTS {audit_run_context} ("
        " run_id uuid PRIMARY KEY, agent_id text NOT NULL, llm_tokens integer NOT NULL DEFAULT 0,"
        " llm_cost_usd double precision NOT NULL DEFAULT 0)",
    )

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e, pos = logged.event, logged.position
        run = e.originator_id
        if isinstance(e, ev.RunStarted):
            curs.execute(
                self.sql(
                    "INSERT INTO {audit_run_context} (run_id, agent_id) VALUES (%s, %s)"
                    " ON CONFLICT (run_id) DO NOTHING"
                ),
                (run, e.agent_id),
            )
        elif isinstance(e, ev.LLMResponded):
            curs.execute(
                self.sql(
                    "UPDATE {audit_run_context} SET llm_tokens = %s, llm_cost_usd = %s"
                    " WHERE run_id = %s"
                ),
                (e.usage.get("total_tokens", 0), e.cost_usd, run),
            )
        elif isinstance(e, ev.ToolCallRequested):
            curs.execute(
                self.sql(
                    "INSERT INTO {audit_tool_calls} (run_id, call_id, agent_id, tool, arguments,"
                    " status, tokens, cost_usd, requested_at, position)"
                    " SELECT %s, %s, c.agent_id, %s, %s, 'requested', c.llm_tokens,"
                    " c.llm_cost_usd, %s, %s FROM (SELECT 1) one"
                    " LEFT JOIN {audit_run_context} c ON c.run_id = %s"
                    " ON CONFLICT (run_id, call_id) DO UPDATE SET status = 'requested',"
                    " arguments = excluded.arguments,"  # after an approval: the arguments it ran
                    " agent_id = excluded.agent_id, tokens = excluded.tokens,"
                    " cost_usd = excluded.cost_usd"
                ),
                (
                    run,
                    text(e.call_id),
                    text(e.tool),
                    jsonb(self.ledger.sealer.stored(e, "arguments")),
                    e.timestamp,
                    pos,
                    run,
                ),
            )
        elif isinstance(e, ev.ApprovalRequested):  # committed before its run's first events:
            curs.execute(  # the run's agent and tokens are filled in by the call's next event
                self.sql(
                    "INSERT INTO {audit_tool_calls} (run_id, call_id, agent_id, tool, arguments,"
                    " status, tokens, cost_usd, requested_at, position, approval_id,"
                    " approval_reason, approval_status, approval_requested_at)"
                    " SELECT %(run)s, %(call)s, c.agent_id, %(tool)s, %(arguments)s,"
                    " 'awaiting_approval', c.llm_tokens, c.llm_cost_usd, %(at)s, %(pos)s,"
                    " %(approval)s, %(reason)s, 'pending', %(at)s FROM (SELECT 1) one"
                    " LEFT JOIN {audit_run_context} c ON c.run_id = %(run)s"
                    " ON CONFLICT (run_id, call_id) DO NOTHING"
                ),
                {
                    "run": e.run_id,
                    "call": text(e.call_id),
                    "tool": text(e.tool),
                    "arguments": jsonb(self.ledger.sealer.stored(e, "arguments")),
                    "at": e.timestamp,
                    "pos": pos,
                    "approval": e.approval_id,
                    "reason": text(e.reason),
                },
            )
        elif isinstance(e, ev.ApprovalGranted | ev.ApprovalDenied | ev.ApprovalExpired):
            self._answered(curs, e)
        elif isinstance(e, ev.ToolCallDenied | ev.ToolCallRejected):
            error = e.reason if isinstance(e, ev.ToolCallDenied) else e.error
            status = "denied" if isinstance(e, ev.ToolCallDenied) else "rejected"
            self._finish(curs, e, pos, status, error=error)
        elif isinstance(e, ev.ToolCallSucceeded):
            self._finish(
                curs,
                e,
                pos,
                "succeeded",
                result=self.ledger.sealer.stored(e, "result"),
                duration_ms=e.duration_ms,
                result_bytes=e.result_bytes,
                truncated=e.truncated,
            )
        elif isinstance(e, ev.ToolCallFailed):
            self._finish(
                curs,
                e,
                pos,
                "failed",
                error=e.error,
                error_code=e.error_code,
                retryable=e.retryable,
                duration_ms=e.duration_ms,
            )
        elif isinstance(e, ev.ToolCallTimedOut):
            self._finish(
                curs,
                e,
                pos,
                "timed_out",
                error=f"timed out after {e.timeout_s}s",
                error_code="TIMEOUT",
                retryable=True,
                duration_ms=e.duration_ms,
            )
        elif isinstance(e, ev.ToolOutcomeUnknown):
            self._finish(
                curs, e, pos, "outcome_unknown", error=e.reason, error_code="OUTCOME_UNKNOWN"
            )
        elif isinstance(e, ev.DecisionLogged) and e.call_id is not None:
            curs.execute(
                self.sql(
                    "UPDATE {audit_tool_calls} SET decision_type = %s"
                    " WHERE run_id = %s AND call_id = %s"
                ),
                (text(e.decision_type), run, text(e.call_id)),
            )

    def approval_answers(self, run_id: UUID) -> dict[str, ApprovalAnswer]:
        """The answers to the approvals the run waited for, by approval id."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT approval_id, approval_status AS status, approved_by AS by,"
                    " approval_note AS note, approval_answered_at AS answered_at"
                    " FROM {audit_tool_calls} WHERE run_id = %s AND approval_id IS NOT NULL"
                ),
                (run_id,),
            ).fetchall()
        return {row["approval_id"]: msgspec.convert(row, ApprovalAnswer) for row in rows}

    def tool_stats(self, agent_id: str, rate_limited: str) -> list[ToolStats]:
        """Per tool the agent called, in name order (``owlclaw tools AGENT``). Every call the
        model made has one row here, whatever became of it, so the figures need no other
        source. ``rate_limited``: how the reason of a rate-limited denial starts."""
        with self.transaction(commit=False) as curs:
            totals = curs.execute(
                self.sql(
                    "SELECT tool, count(*) AS calls,"
                    " count(*) FILTER (WHERE status = 'succeeded') AS succeeded,"
                    " count(*) FILTER (WHERE status = 'timed_out') AS timeouts,"
                    " count(*) FILTER (WHERE truncated) AS truncated,"
                    " percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,"
                    " percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms"
                    " FROM {audit_tool_calls} WHERE agent_id = %(agent)s"
                    " GROUP BY tool ORDER BY tool"
                ),
                {"agent": agent_id},
            ).fetchall()
            errors = curs.execute(
                self.sql(
                    f"SELECT tool, {ERROR_CODE} AS code, count(*) AS n FROM {{audit_tool_calls}}"
                    " WHERE agent_id = %(agent)s"
                    " AND status NOT IN ('requested', 'succeeded', 'timed_out',"
                    " 'awaiting_approval') GROUP BY 1, 2 ORDER BY 1, 2"
                ),
                {"agent": agent_id, "rate": rate_limited},
            ).fetchall()
        by_tool: dict[str, dict[str, int]] = {}
        for row in errors:
            by_tool.setdefault(row["tool"], {})[row["code"]] = row["n"]
        return [
            ToolStats(
                tool=row["tool"],
                calls=row["calls"],
                succeeded=row["succeeded"],
                errors=by_tool.get(row["tool"], {}),
                timeouts=row["timeouts"],
                p50_ms=_ms(row["p50_ms"]),
                p95_ms=_ms(row["p95_ms"]),
                truncated=row["truncated"],
            )
            for row in totals
        ]

    def _answered(
        self, curs: Cursor[Any], e: ev.ApprovalGranted | ev.ApprovalDenied | ev.ApprovalExpired
    ) -> None:
        status, by, note = "expired", None, None
        if not isinstance(e, ev.ApprovalExpired):
            status = "granted" if isinstance(e, ev.ApprovalGranted) else "denied"
            by, note = text(e.by), text(e.note)
        if isinstance(e, ev.ApprovalGranted) and e.awaiting:  # one of several grants needed
            curs.execute(
                self.sql(
                    "UPDATE {audit_tool_calls}"
                    " SET approved_by = concat_ws(', ', approved_by, %(by)s::text)"
                    " WHERE approval_id = %(approval)s AND approval_status = 'pending'"
                ),
                {"by": by, "approval": e.approval_id},
            )
            return
        curs.execute(
            self.sql(
                "UPDATE {audit_tool_calls} SET approval_status = %(status)s,"
                " approved_by = CASE WHEN %(granted)s::boolean"
                " THEN concat_ws(', ', approved_by, %(by)s::text) ELSE %(by)s::text END,"
                " approval_note = %(note)s, approval_answered_at = %(at)s,"
                " approval_wait_ms = extract(epoch FROM %(at)s - approval_requested_at) * 1000"
                " WHERE approval_id = %(approval)s AND approval_status = 'pending'"
            ),
            {
                "status": status,
                "granted": status == "granted",
                "by": by,
                "note": note,
                "at": e.timestamp,
                "approval": e.approval_id,
            },
        )

    def _finish(
        self,
        curs: Cursor[Any],
        e: Any,
        pos: int,
        status: str,
        *,
        result: Any = None,
        error: str | None = None,
        error_code: str | None = None,
        retryable: bool | None = None,
        duration_ms: float | None = None,
        result_bytes: int | None = None,
        truncated: bool | None = None,
    ) -> None:
        """Record an outcome; calls refused before any request get a row of their own."""
        curs.execute(
            self.sql(
                "INSERT INTO {audit_tool_calls} AS a (run_id, call_id, agent_id, tool, status,"
                " result, error, error_code, retryable, duration_ms, result_bytes, truncated,"
                " requested_at, finished_at, position)"
                " SELECT %(run)s, %(call)s, c.agent_id, %(tool)s, %(status)s, %(result)s,"
                " %(error)s, %(code)s, %(retryable)s, %(duration)s, %(bytes)s, %(truncated)s,"
                " %(at)s, %(at)s, %(pos)s"
                " FROM (SELECT 1) one LEFT JOIN {audit_run_context} c ON c.run_id = %(run)s"
                " ON CONFLICT (run_id, call_id) DO UPDATE SET status = excluded.status,"
                " agent_id = coalesce(a.agent_id, excluded.agent_id),"
                " result = excluded.result, error = excluded.error,"
                " error_code = excluded.error_code, retryable = excluded.retryable,"
                " duration_ms = excluded.duration_ms, result_bytes = excluded.result_bytes,"
                " truncated = excluded.truncated, finished_at = excluded.finished_at"
            ),
            {
                "run": e.originator_id,
                "call": text(e.call_id),
                "tool": text(e.tool),
                "status": status,
                "result": None if result is None else jsonb(result),
                "error": text(error),
                "code": error_code,
                "retryable": retryable,
                "duration": duration_ms,
                "bytes": result_bytes,
                "truncated": truncated,
                "at": e.timestamp,
                "pos": pos,
            },
        )


ERROR_CODE = (
    "CASE status WHEN 'rejected' THEN 'REJECTED'"
    " WHEN 'denied' THEN CASE WHEN approval_status IN ('denied', 'expired')"
    " THEN 'APPROVAL_' || upper(approval_status)"
    " WHEN starts_with(error, %(rate)s) THEN 'RATE_LIMITED'"
    " ELSE 'DENIED' END"
    " WHEN 'outcome_unknown' THEN 'OUTCOME_UNKNOWN' ELSE coalesce(error_code, 'FAILED') END"
)
"""A refused or failed call's error code: rejected (invalid arguments or unknown tool), denied
(governance, disabled by the operator), an approval denied or expired, rate-limited, a failed
call's own code, outcome unknown."""


class ToolStats(msgspec.Struct, frozen=True):
    tool: str
    calls: int
    """Every call the model made of this tool, whatever its outcome (also one still running)."""
    succeeded: int
    errors: dict[str, int]
    """Refused and failed calls by error code (timeouts are counted apart)."""
    timeouts: int
    p50_ms: float | None
    p95_ms: float | None
    """Duration percentiles of the calls that ran; None when none did."""
    truncated: int
    """Successful calls whose result the model saw cut to the tool's limit."""


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


class ApprovalAnswer(msgspec.Struct, frozen=True):
    approval_id: str
    status: str
    """``pending``, ``granted``, ``denied`` or ``expired``."""
    by: str | None
    note: str | None
    answered_at: datetime | None
