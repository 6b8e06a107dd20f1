"""The status command: server, database, projections, agents and workers in one report. Its own
module: it gathers from every view and the server, and renders the largest report."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

import msgspec
from rich.markup import escape
from rich.table import Table

from owlclaw.cli.common import (
    JsonOption,
    app,
    handles_errors,
    open_ledger,
    out,
    print_json,
    server_client,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import load_config
from owlclaw.reports.relative_time import relative


@app.command()
@handles_errors
def status(as_json: JsonOption = False) -> None:
    """Agents (how many are registered; those with runs or served), active runs, projection
    lag, pending timers, database and server health, and the server's background workers
    (state, restarts, last error)."""
    from owlclaw.client import ServerUnavailable
    from owlclaw.compose.read import open_views
    from owlclaw.reports.inspection import bring_up_to_date
    from projections import AgentsView, RunsView, SchedulesView
    from projections.status import projection_status

    config = load_config()
    report: dict[str, Any] = {}
    with server_client(config, timeout_s=5) as client:
        try:
            report["server"] = {"url": client.url, **client.status()}
        except ServerUnavailable:
            report["server"] = {"url": client.url, "running": False}
    with open_ledger(config) as (_, led):
        report["database"] = {"ok": True, "head": led.log.head()}
        views = open_views(led, config)
        report["projections"] = [msgspec.to_builtins(projection_status(led, v)) for v in views]
        registry = next(v for v in views if isinstance(v, AgentsView))
        behind = bring_up_to_date(led, registry)
        report["registered_agents"] = registry.count()
        if behind:
            report["registered_agents_behind"] = behind
        runs = next(v for v in views if isinstance(v, RunsView))
        schedules = next(v for v in views if isinstance(v, SchedulesView))
        report["agents"] = runs.per_agent()
        report["active_runs"] = runs.active()
        report["pending_timers"] = schedules.pending()
        report["agents"] = _with_served(report["agents"], report["server"].get("agents") or {})
        listed = [row["agent_id"] for row in report["agents"]]
        today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
        runs_today = runs.started_since(today, listed)
        next_timers = schedules.next_fires(listed)
    for row in report["agents"]:
        row["runs_today"] = runs_today.get(row["agent_id"], 0)
        row["next_timer"] = next_timers.get(row["agent_id"])
    if as_json:
        print_json(report)
        return
    _print_status(report)


def _with_served(
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


def _print_status(report: dict[str, Any]) -> None:
    server = report["server"]
    if server.get("running", True):
        out.print(
            f"server   [green]up[/] at {server['url']}: placement {server['placement']},"
            f" timers {server['timer_backend']}, hatchet {server.get('hatchet', '-')}",
            highlight=False,
        )
    else:
        out.print(f"server   [yellow]not running[/] at {server['url']}", highlight=False)
    out.print(f"database [green]ok[/], log head {report['database']['head']}", highlight=False)
    out.print(f"timers   {report['pending_timers']} pending", highlight=False)
    out.print(f"agents   {report['registered_agents']} registered", highlight=False)
    if report.get("registered_agents_behind"):
        out.print(f"[yellow]{escape(report['registered_agents_behind'])}[/]", highlight=False)
    table = Table(
        whole("agent"),
        *(whole(column, right=True) for column in ("runs", "today", "active")),
        whole("last run\nnext timer"),
        text("app"),
        title="agents with runs or served",
    )
    for a in report["agents"]:
        app_state = "-" if "app_error" not in a else "[green]ok[/]"
        if a.get("app_warning"):
            app_state = f"[yellow]previous code[/]: {escape(a['app_warning'])}"
        if a.get("app_error"):
            app_state = f"[red]failed[/]: {escape(a['app_error'])}"
        if a.get("unreadable"):
            app_state = f"[red]unreadable[/]: {escape(a['unreadable'])}"
        table.add_row(
            a["agent_id"],
            str(a["runs"]),
            str(a["runs_today"]),
            str(a["active"]),
            stacked(*(relative(a[k]) if a[k] else "-" for k in ("last_run", "next_timer"))),
            app_state,
        )
    out.print(table)
    lag = Table(
        whole("name"),
        *(whole(column, right=True) for column in ("position", "lag events", "lag seconds")),
        title="projections",
    )
    for p in report["projections"]:
        lag.add_row(p["name"], str(p["position"]), str(p["lag_events"]), f"{p['lag_seconds']:.3f}")
    out.print(lag)
    for name, state in sorted((server.get("mcp_servers") or {}).items()):
        colour = "red" if state.startswith("unavailable") else "green"
        out.print(f"mcp      {escape(name)}: [{colour}]{escape(state)}[/]", highlight=False)
    for a in report["agents"]:
        for name, last in sorted((a.get("heartbeat_sources") or {}).items()):
            found = f"[red]failed[/]: {escape(last['error'])}" if last["error"] else last["count"]
            out.print(
                f"heartbeat {a['agent_id']} {name} ({last['kind']}): {found}", highlight=False
            )
    if server.get("workers"):
        out.print(_workers_table(server["workers"]))


def _workers_table(workers: list[dict[str, Any]]) -> Table:
    """The server's supervised background loops: state, restarts and the last error."""
    table = Table(
        whole("worker"),
        whole("state"),
        whole("restarts", right=True),
        text("last error"),
        title="workers",
    )
    for w in workers:
        state = {"running": "[green]running[/]", "stopped": "stopped", "done": "done"}.get(
            w["state"], f"[red]{w['state']}[/]"
        )
        error = "-"
        if w["last_error"]:
            error = f"{str(w['last_error_at'])[:19]} {w['last_error']}"
        table.add_row(w["name"], state, str(w["restarts"]), escape(error))
    return table
