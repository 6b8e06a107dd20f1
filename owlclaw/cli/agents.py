"""Making and serving agents: init, run, trigger, status, demo."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from events import Ledger
from events import catalog as ev
from events.catalog import event_fields
from owlclaw.app import AppError
from owlclaw.cli.common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_USAGE,
    JsonOption,
    app,
    command_name,
    err,
    exit_served,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.reports.narrate import step_text
from owlclaw.reports.relative_time import relative

ENDED_WELL = ("completed", "skipped", "parked")
WAIT_READY_S = 60.0
"""How long ``owlclaw trigger`` waits for a server that is still starting (Ray, the embedding
model and Hatchet take tens of seconds on a small machine)."""


@app.command()
@handles_errors
def init(
    path: Annotated[Path, typer.Argument(help="Directory to create the agent app in.")],
    agent_id: Annotated[
        str | None, typer.Option("--id", help="Agent id (default: the directory name).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Scaffold an agent app: SOUL.md, IDENTITY.md, a skill, owlclaw.toml, handlers.py (a
    capability and a state provider) and an offline script for the scripted model."""
    from owlclaw.cli.scaffold import scaffold

    made = scaffold(path, agent_id)
    files = sorted(str(p.relative_to(made.root)) for p in made.root.rglob("*") if p.is_file())
    if as_json:
        print_json({"agent_id": made.agent_id, "app_dir": str(made.root), "files": files})
        return
    out.print(f"[green]created[/] agent [bold]{made.agent_id}[/] in {made.root}")
    for name in files:
        out.print(f"  {name}")
    owlclaw = command_name()
    out.print(
        f"\nnext:\n  {owlclaw} run {path}\n"
        f"  {owlclaw} trigger {made.agent_id} --focus 'check the ticket queue'",
        soft_wrap=True,
    )


@app.command()
@handles_errors
def run(
    apps: Annotated[list[Path], typer.Argument(help="Agent app directories to serve.")],
    placement: Annotated[
        str | None, typer.Option(help="local | shared | dedicated (default: configuration).")
    ] = None,
) -> None:
    """Serve agent apps: database, projections, timer service, agents (Ray actors) and the
    webhook endpoint, until Ctrl-C. Each app is validated first (files, [governance],
    handlers.py): an invalid one is refused with exit code 5 before anything starts."""
    from owlclaw.server.service import Service
    from owlclaw.server.validation import InvalidApps, validate_apps

    config = _with_placement(load_config(), placement)
    try:
        loaded = validate_apps(apps, config.runtime.app_load_timeout_s)  # before anything starts
    except InvalidApps as e:
        for problem in e.problems[:-1]:
            err.print(f"[bold red]error:[/] {escape(problem)}", highlight=False, soft_wrap=True)
        fail(e.problems[-1], "fix each app named above", EXIT_CONFIG)
    ids = [a.agent_id for a in loaded]
    if len(set(ids)) != len(ids):
        raise AppError(f"two apps have the same agent id: {', '.join(sorted(ids))}")
    asyncio.run(_serve(Service(config, loaded, progress=_starting), config))
    exit_served()


def _with_placement(config: OwlClawConfig, placement: str | None) -> OwlClawConfig:
    if placement is None:
        return config
    runtime = msgspec.to_builtins(config.runtime) | {"placement": placement}
    try:
        return msgspec.structs.replace(
            config, runtime=msgspec.convert(runtime, type(config.runtime))
        )
    except msgspec.ValidationError as e:
        fail(f"--placement: {e}", "one of local, shared, dedicated", EXIT_USAGE)
        raise


def _starting(part: str) -> None:
    err.print(f"[dim]starting {part}…[/]")


async def _serve(service: Any, config: OwlClawConfig) -> None:
    from owlclaw.server.webhook import serving

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serving(service, config):
        url = f"http://{config.server.host}:{config.server.port}"
        out.print(
            f"[green]serving[/] {', '.join(service.apps)} at {url} "
            f"(placement {config.runtime.placement}, timers {service.timer_backend}); "
            "Ctrl-C stops",
            highlight=False,
        )
        await stop.wait()
        err.print("[dim]stopping…[/]")


def _payload(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        fail(f"--payload is not valid JSON: {e}", "e.g. --payload '{\"price\": 101.5}'", EXIT_USAGE)
    if not isinstance(data, dict):
        fail("--payload must be a JSON object", "e.g. --payload '{\"price\": 101.5}'", EXIT_USAGE)
    return data


@app.command()
@handles_errors
def trigger(
    agent: Annotated[str, typer.Argument(help="Agent id (served by `owlclaw run`).")],
    focus: Annotated[str | None, typer.Option(help="What this run should focus on.")] = None,
    payload: Annotated[str | None, typer.Option(help="A JSON object given to the run.")] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Return once the run is accepted.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the run to end.")] = 600,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="Key that makes a retried trigger return the same run (default: a new one)."
        ),
    ] = None,
    wait_ready: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds to wait for the server to be ready (just started: `owlclaw run &`).",
        ),
    ] = WAIT_READY_S,
    as_json: JsonOption = False,
) -> None:
    """Start a run of a served agent; wait for it and show its steps (exit 1 if it failed)."""
    from owlclaw.client import ServerClient

    data = _payload(payload)
    config = load_config()
    with ServerClient(config) as client:
        waiting = f"waiting up to {wait_ready:g} s for the server at {client.url} to be ready…"
        client.wait_ready(
            wait_ready, waiting=lambda: err.print(f"[dim]{waiting}[/]", highlight=False)
        )
        accepted = client.submit(
            agent, focus, data, idempotency_key=idempotency_key or uuid.uuid4().hex
        )
    run_id = accepted["run_id"]
    if no_wait:
        if as_json:
            print_json(accepted)
        else:
            out.print(f"accepted run {run_id} of {agent}")
        return
    with open_ledger(config) as (_, led):
        events = _follow(led, run_id, timeout, show=not as_json)
        warning = led.load_agent(agent).state.app_warning  # as the run found its app
    if warning is not None:
        err.print(
            f"[yellow]warning:[/] {agent} runs its previous code: {escape(warning)}",
            highlight=False,
            soft_wrap=True,
        )
    status = _parked_status(events) or type(events[-1]).__name__.removeprefix("Run").lower()
    if as_json:
        print_json(
            {
                "agent_id": agent,
                "run_id": run_id,
                "status": status,
                "app_warning": warning,
                "steps": [{"type": type(e).__name__, **event_fields(e)} for e in events],
            }
        )
    if status not in ENDED_WELL:
        raise typer.Exit(EXIT_FAILED)


def _parked_status(events: list[ev.LedgerEvent]) -> str | None:
    """ "parked" when the run waits for an approval (the command says which) or for its
    sub-agents, else None."""
    if not events or not isinstance(events[-1], ev.RunParked):
        return None
    if events[-1].spawn_id:
        err.print("[yellow]parked:[/] waiting for its sub-agents (`owlclaw ledger` shows them)")
        return "parked"
    approval_id = events[-1].approval_id
    err.print(
        f"[yellow]parked:[/] waiting for approval {approval_id} "
        f"(`owlclaw approve {approval_id}` or `owlclaw deny {approval_id}`)",
        highlight=False,
    )
    return "parked"


def _follow(led: Ledger, run_id: str, timeout: float, *, show: bool) -> list[ev.LedgerEvent]:
    """The run's events as they are committed, printed as they come, until its end event."""
    from projections.feed import afollow_run

    async def follow() -> list[ev.LedgerEvent]:
        events = []
        async for event in afollow_run(
            led, run_id, poll_s=0.1, timeout_s=timeout, until_parked=True
        ):
            events.append(event)
            if show and (text := step_text(event)):
                out.print(text, highlight=False, markup=False, soft_wrap=True)
        return events

    try:
        return asyncio.run(follow())
    except TimeoutError as e:
        fail(str(e), "see `owlclaw status`", EXIT_FAILED)


@app.command()
@handles_errors
def status(as_json: JsonOption = False) -> None:
    """Agents (how many are registered; those with runs or served), active runs, projection
    lag, pending timers, database and server health, and the server's background workers
    (state, restarts, last error)."""
    from owlclaw.client import ServerClient, ServerUnavailable
    from owlclaw.compose.read import open_views
    from owlclaw.reports.inspection import bring_up_to_date
    from projections import AgentsView, RunsView, SchedulesView
    from projections.status import projection_status

    config = load_config()
    report: dict[str, Any] = {}
    with ServerClient(config, timeout_s=5) as client:
        try:
            report["server"] = {"url": client.url, **client.status()}
        except ServerUnavailable:
            report["server"] = {"url": client.url, "running": False}
    with open_ledger(config) as (_, led):
        report["database"] = {"ok": True, "head": led.head()}
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
        state = {"running": "[green]running[/]", "stopped": "stopped"}.get(
            w["state"], f"[red]{w['state']}[/]"
        )
        error = "-"
        if w["last_error"]:
            error = f"{str(w['last_error_at'])[:19]} {w['last_error']}"
        table.add_row(w["name"], state, str(w["restarts"]), escape(error))
    return table


@app.command()
@handles_errors
def demo(as_json: JsonOption = False) -> None:
    """The seeds' trading agent through the four acceptance scenarios on the embedded default
    (PostgreSQL + pgvector, Ray actors, projections, timers, local embeddings, webhook)."""
    from owlclaw.demo import AGENT, Demo

    report = asyncio.run(Demo(load_config(), err if as_json else out).run())
    if as_json:
        print_json(report)
        exit_served()
    owlclaw = command_name()
    out.print(
        f"\n[bold green]demo done in {report.seconds:.0f} s.[/] Inspect what happened:\n"
        f"  {owlclaw} ledger {AGENT}                  every event, in log order\n"
        f"  {owlclaw} memory {AGENT} --recall 'market crash recovery'\n"
        f"  {owlclaw} schedules {AGENT} --all\n"
        f"  {owlclaw} replay {AGENT} {report.fired_run_no} --verify"
        "   re-execute the fired run without a model\n"
        f"  {owlclaw} verify {AGENT}\n"
        f"  cat {report.memory_md}",
        highlight=False,
        soft_wrap=True,
    )
    exit_served()
