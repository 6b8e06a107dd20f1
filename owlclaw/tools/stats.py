"""Per-tool usage of one agent, from the audit view (``owlclaw tools AGENT``).

Every call the model made has one row in ``audit_tool_calls``, whatever became of it, so the
figures need no other source: calls, errors by code, timeouts, p50/p95 duration of the calls
that ran (succeeded, failed, timed out) and how often the model saw a truncated result.
"""

from __future__ import annotations

import msgspec

from owlclaw.tools.rate_limits import RATE_LIMITED
from projections.tool_calls import AuditView

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


def tool_stats(view: AuditView, agent_id: str) -> list[ToolStats]:
    """Per tool the agent called, in name order."""
    with view.datastore.transaction(commit=False) as curs:
        totals = curs.execute(
            view.sql(
                "SELECT tool, count(*) AS calls,"
                " count(*) FILTER (WHERE status = 'succeeded') AS succeeded,"
                " count(*) FILTER (WHERE status = 'timed_out') AS timeouts,"
                " count(*) FILTER (WHERE truncated) AS truncated,"
                " percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,"
                " percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms"
                " FROM {audit_tool_calls} WHERE agent_id = %(agent)s GROUP BY tool ORDER BY tool"
            ),
            {"agent": agent_id},
        ).fetchall()
        errors = curs.execute(
            view.sql(
                f"SELECT tool, {ERROR_CODE} AS code, count(*) AS n FROM {{audit_tool_calls}}"
                " WHERE agent_id = %(agent)s"
                " AND status NOT IN ('requested', 'succeeded', 'timed_out', 'awaiting_approval')"
                " GROUP BY 1, 2 ORDER BY 1, 2"
            ),
            {"agent": agent_id, "rate": RATE_LIMITED},
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


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
