"""``owlclaw status``'s report of the ledger and its views: the database, each view's lag, the
agents with runs or served, active runs and pending timers. The CLI computes it without a
server; a running server computes it from its warm views (``GET /status?ledger=1``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, time
from typing import Any

import msgspec

from events import Ledger
from owlclaw.reports.inspection import bring_up_to_date, projections_status
from projections import AgentsView, RunsView, SchedulesView
from projections.view import View


def ledger_status(
    led: Ledger, views: Sequence[View], served: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The report's parts read from the ledger; ``served``: the server's agents (its
    ``status()["agents"]``, empty without a server)."""
    report: dict[str, Any] = {"database": {"ok": True, "head": led.log.head()}}
    report["projections"] = msgspec.to_builtins(projections_status(led, views))
    registry = next(v for v in views if isinstance(v, AgentsView))
    behind = bring_up_to_date(led, registry)
    report["registered_agents"] = registry.count()
    if behind:
        report["registered_agents_behind"] = behind
    runs = next(v for v in views if isinstance(v, RunsView))
    schedules = next(v for v in views if isinstance(v, SchedulesView))
    report["active_runs"] = runs.active()
    report["pending_timers"] = schedules.pending()
    agents = with_served(runs.per_agent(), served)
    listed = [row["agent_id"] for row in agents]
    today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
    runs_today = runs.started_since(today, listed)
    next_timers = schedules.next_fires(listed)
    for row in agents:
        row["runs_today"] = runs_today.get(row["agent_id"], 0)
        row["next_timer"] = next_timers.get(row["agent_id"])
    report["agents"] = agents
    return report


def with_served(
    agents: list[dict[str, Any]], served: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The agents with runs plus those the server serves without any, each served one with
    ``app_error``: why its app does not load (None: it loads), and ``unreadable`` when the
    server could not read its stream."""
    rows = {a["agent_id"]: dict(a) for a in agents}
    for agent_id, info in served.items():
        row = rows.setdefault(
            agent_id, {"agent_id": agent_id, "runs": 0, "active": 0, "last_run": None}
        )
        row["app_error"] = info.get("app_error")
        row["app_warning"] = info.get("app_warning")
        row["heartbeat_sources"] = info.get("heartbeat_sources") or {}
        if "unreadable" in info:
            row["unreadable"] = info["unreadable"]
    return sorted(rows.values(), key=lambda a: str(a["agent_id"]))
