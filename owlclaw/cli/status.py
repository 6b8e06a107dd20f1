"""The status command: server, database, projections, agents and workers in one report. Its own
module: it gathers from every view and the server, and renders the largest report."""

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from owlclaw.cli.common import (
    JsonOption,
    app,
    ask_server,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.reports.relative_time import relative

if TYPE_CHECKING:
    from owlclaw.client import ServerClient

STATUS_TIMEOUT_S = 5.0
"""How long ``owlclaw status`` waits for the server before showing it as not running."""


@app.command()
@handles_errors
def status(as_json: JsonOption = False) -> None:
    """Agents (how many are registered; those with runs or served), active runs, projection
    lag, pending timers, database and server health, and the server's background workers
    (state, restarts, last error)."""
    config = load_config()
    served = ask_server(config, _served_status, timeout_s=STATUS_TIMEOUT_S)
    if served is not None and "ledger" in served:
        report = {"server": served["server"], **served["ledger"]}
    else:
        report = _status_here(config, served)
    if as_json:
        print_json(report)
        return
    _print_status(report)


def _served_status(client: "ServerClient") -> dict[str, Any] | None:
    """The server's status, with its report of the ledger when the principal may read every
    agent's; a server still starting, or not answering in time, is shown as not running (None:
    nobody listens)."""
    from owlclaw.client import NoServer, ServerRefused, ServerUnavailable

    try:
        answer = client.status(ledger=True)
    except NoServer:
        return None
    except ServerUnavailable:
        answer = {"running": False}
    except ServerRefused as e:
        if e.code != "starting":
            raise
        answer = {"running": False, "starting": True}
    ledger = answer.pop("ledger", None)
    served = {"server": {"url": client.url, **answer}}
    return served if ledger is None else {**served, "ledger": ledger}


def _status_here(config: OwlClawConfig, served: dict[str, Any] | None) -> dict[str, Any]:
    """The report read in this process (with the server's part when one answered, for a
    principal who may not read every agent's status)."""
    from owlclaw.compose.read import open_views
    from owlclaw.reports.status import ledger_status

    if served is None:
        url = f"http://{config.server.host}:{config.server.port}"
        server: dict[str, Any] = {"url": url, "running": False}
    else:
        server = served["server"]
    with open_ledger(config) as (_, led):
        ledger = ledger_status(led, open_views(led, config), server.get("agents") or {})
    return {"server": server, **ledger}


def _print_status(report: dict[str, Any]) -> None:
    server = report["server"]
    if server.get("running", True):
        out.print(
            f"server   [green]up[/] at {server['url']}: placement {server['placement']},"
            f" timers {server['timer_backend']}, hatchet {server.get('hatchet', '-')}",
            highlight=False,
        )
    else:
        state = "starting" if server.get("starting") else "not running"
        out.print(f"server   [yellow]{state}[/] at {server['url']}", highlight=False)
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
