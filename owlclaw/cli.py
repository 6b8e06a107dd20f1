"""The ``owlclaw`` command line (Typer + Rich).

Data commands take ``--json``. User mistakes print one line with a hint and exit non-zero
(no traceback unless ``--debug``). Exit codes: 1 failure (e.g. verification failed),
2 usage, 3 not found, 4 database unavailable, 5 invalid configuration.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import typer
from rich.console import Console
from rich.table import Table

from events import Ledger, LedgerError, LedgerUnavailable
from events.catalog import event_fields
from events.hashchain import verify_ledger
from owlclaw.config import ConfigError, OwlClawConfig, load_config
from owlclaw.database import Database, DatabaseUnavailable, open_database
from projections.runner import ProjectionRunner

app = typer.Typer(no_args_is_help=True, add_completion=False, help="OwlClaw agent runtime.")
bench_app = typer.Typer(no_args_is_help=True, help="Measure OwlClaw on this machine.")
app.add_typer(bench_app, name="bench")
projections_app = typer.Typer(no_args_is_help=True, help="Read models of the ledger.")
app.add_typer(projections_app, name="projections")
timers_app = typer.Typer(no_args_is_help=True, help="The timer service.")
app.add_typer(timers_app, name="timers")

out = Console()
err = Console(stderr=True)

EXIT_FAILED, EXIT_NOT_FOUND, EXIT_DATABASE, EXIT_CONFIG = 1, 3, 4, 5

F = TypeVar("F", bound=Callable[..., Any])
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


class State:
    debug = False


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    State.debug = debug


def _fail(message: str, hint: str, code: int) -> None:
    err.print(f"[bold red]error:[/] {message}\n[dim]hint: {hint}[/]", highlight=False)
    raise typer.Exit(code)


def handles_errors(fn: F) -> F:
    """Turn expected failures into one clear line and a stable exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except Exception as e:
            if State.debug:
                raise
            if isinstance(e, ConfigError):
                _fail(str(e), "fix owlclaw.toml or the OWLCLAW_* variable named above", EXIT_CONFIG)
            if isinstance(e, DatabaseUnavailable | LedgerUnavailable):
                _fail(str(e), "is PostgreSQL running? check OWLCLAW_DATABASE_URL", EXIT_DATABASE)
            if isinstance(e, KeyError) and isinstance(e, LedgerError):
                _fail(str(e), "list what exists with `owlclaw ledger --help`", EXIT_NOT_FOUND)
            if isinstance(e, LedgerError):
                _fail(str(e), "run `owlclaw verify` to check the ledger", EXIT_FAILED)
            raise

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_ledger(config: OwlClawConfig | None = None) -> Iterator[tuple[Database, Ledger]]:
    config = config or load_config()
    database = open_database(config)
    with Ledger(database.url, snapshot_interval=config.ledger.snapshot_interval) as ledger:
        yield database, ledger


@contextmanager
def bench_database(name: str) -> Iterator[str]:
    """A scratch database on the configured server for one benchmark, dropped afterwards."""
    server = open_database(load_config())
    database = server.create_database(name)
    try:
        yield database.url
    finally:
        server.drop_database(name)


def print_json(data: Any) -> None:
    sys.stdout.write(msgspec.json.encode(data).decode() + "\n")


def _summary(fields: dict[str, Any], width: int = 90) -> str:
    text = json.dumps(fields, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command()
@handles_errors
def ledger(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    limit: Annotated[int, typer.Option(help="Show at most this many (latest) events.")] = 200,
    as_json: JsonOption = False,
) -> None:
    """Print an agent's events (its stream and its runs' streams) in log order."""
    with open_ledger() as (_, led):
        history = led.agent_history(agent)[-limit:]
    if as_json:
        print_json(
            [
                {
                    "position": h.position,
                    "stream": h.event.originator_id,
                    "version": h.event.originator_version,
                    "type": type(h.event).__name__,
                    "timestamp": h.event.timestamp,
                    "data": event_fields(h.event),
                }
                for h in history
            ]
        )
        return
    table = Table(title=f"ledger of {agent}", show_lines=False)
    for column in ("pos", "stream", "ver", "event", "time", "data"):
        table.add_column(column, overflow="fold" if column == "data" else "ellipsis")
    for h in history:
        e = h.event
        table.add_row(
            str(h.position),
            ("agent" if e.stream == "agent" else "run ") + " " + str(e.originator_id)[:8],
            str(e.originator_version),
            type(e).__name__,
            e.timestamp.strftime("%H:%M:%S.%f")[:-3],
            _summary(event_fields(e)),
        )
    out.print(table)


@app.command()
@handles_errors
def verify(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every stream).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute the hash chains; name the first altered event of each stream."""
    with open_ledger() as (database, led):
        streams = None
        if agent is not None:
            loaded = led.load_agent(agent)
            streams = [loaded.id, *loaded.run_ids()]
        report = verify_ledger(database.url, streams)
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "streams": report.streams,
                "events": report.events,
                "breaks": [
                    {
                        "stream": b.stream,
                        "version": b.version,
                        "position": b.position,
                        "reason": b.reason,
                    }
                    for b in report.breaks
                ],
            }
        )
    elif report.ok:
        out.print(
            f"[green]ok[/]: {report.events} events in {report.streams} streams, chains intact"
        )
    else:
        for b in report.breaks:
            out.print(f"[red]BROKEN[/] {b}")
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command()
@handles_errors
def demo() -> None:
    """Start the embedded database, record a sample agent run, print and verify its ledger."""
    from owlclaw.demo import record_sample_run

    with open_ledger() as (database, led):
        agent_id = record_sample_run(led)
        out.print(f"[bold]recorded a sample run of[/] {agent_id} in {database.url}")
    ledger(agent_id, limit=200, as_json=False)
    verify(agent_id, as_json=False)
    out.print(
        f"\ninspect it yourself:\n  owlclaw ledger {agent_id} --json\n  owlclaw verify {agent_id}"
    )


@app.command()
@handles_errors
def replay(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    run_no: Annotated[int, typer.Argument(min=1, help="Run number (1 = the agent's first run).")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Re-execute with the replay model and compare.")
    ] = False,
    app_dir: Annotated[
        Path | None, typer.Option("--app", help="The agent's app directory (identity, config).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a recorded run step by step; with --verify, re-execute it without calling a model."""
    from events.aggregates import run_stream_id

    with open_ledger() as (_, led):
        if run_no > led.load_agent(agent).state.run_count:
            _fail(f"agent {agent} has no run {run_no}", f"`owlclaw ledger {agent}`", EXIT_NOT_FOUND)
        events = led.stream(run_stream_id(agent, run_no))
        report = None
        if verify:
            from owlclaw.app import load_app
            from owlclaw.runtime.verify import replay_run

            loaded = load_app(app_dir) if app_dir is not None else None
            report = replay_run(led, agent, run_no, app=loaded, limits=load_config().runtime)
    if as_json:
        print_json(
            {
                "steps": [{"type": type(e).__name__, **event_fields(e)} for e in events],
                "verify": None if report is None else report.__dict__,
            }
        )
    else:
        for e in events:
            summary = _summary(event_fields(e))
            out.print(f"{e.originator_version:>4} {type(e).__name__:<22} {summary}")
        if report is not None and report.matched:
            out.print(f"[green]replay matches[/]: {report.compared} steps reproduced")
        elif report is not None:
            for line in report.differences:
                out.print(f"[red]DIFFERS[/] {line}")
    if report is not None and not report.matched:
        raise typer.Exit(EXIT_FAILED)


@timers_app.command("serve")
@handles_errors
def timers_serve() -> None:
    """Register schedules with the configured backend and fire built-in timers (until Ctrl-C)."""
    from owlclaw.timers.serve import serve

    config = load_config()
    with open_ledger(config) as (_, led):
        err.print(f"timer service: backend {config.timers.backend}; Ctrl-C stops")
        serve(led, config)


@timers_app.command("hatchet-worker")
@handles_errors
def timers_hatchet_worker() -> None:
    """Receive Hatchet's timer fires and deliver them to the agents (HATCHET_CLIENT_* env)."""
    from owlclaw.timers.serve import hatchet_worker

    config = load_config()
    with open_ledger(config) as (_, led):
        hatchet_worker(led, config)


@app.command()
@handles_errors
def schedules(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every agent).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Include ended schedules.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Schedules with their next fire time, backend and last outcome."""
    from projections import SchedulesView

    with open_ledger() as (_, led):
        if agent is not None:
            led.load_agent(agent)
        view = SchedulesView(led.recorder.datastore)
        view.create_table()
        ProjectionRunner(led, view).catch_up()
        with view.datastore.transaction(commit=False) as curs:
            rows = curs.execute(
                view.sql(
                    "SELECT schedule_id, agent_id, kind, focus, cron, status, next_fire_at,"
                    " last_fire_at, last_outcome, fires, backend FROM {schedules}"
                    " WHERE (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
                    " AND (%(every)s OR status IN ('requested', 'registered'))"
                    " ORDER BY agent_id, next_fire_at NULLS LAST"
                ),
                {"agent": agent, "every": every},
            ).fetchall()
    if as_json:
        print_json(rows)
        return
    table = Table(title="schedules" + (f" of {agent}" if agent else ""))
    for column in ("schedule", "agent", "kind", "focus", "next fire", "status", "last outcome"):
        table.add_column(column, overflow="fold" if column == "focus" else "ellipsis")
    for r in rows:
        table.add_row(
            r["schedule_id"],
            r["agent_id"],
            r["cron"] or r["kind"],
            r["focus"],
            r["next_fire_at"].strftime("%Y-%m-%d %H:%M:%S") if r["next_fire_at"] else "-",
            f"{r['status']} ({r['backend'] or '-'})",
            r["last_outcome"] or "-",
        )
    out.print(table)


@projections_app.command("status")
@handles_errors
def projections_status(as_json: JsonOption = False) -> None:
    """Position and lag (events and seconds behind the log head) of every projection."""
    from projections import open_views
    from projections.runner import projection_status

    config = load_config()
    with open_ledger(config) as (_, led):
        statuses = [projection_status(led, view) for view in open_views(led, config)]
    if as_json:
        print_json(statuses)
        return
    table = Table(title="projections")
    for column in ("name", "position", "head", "lag events", "lag seconds"):
        table.add_column(column, justify="left" if column == "name" else "right")
    for s in statuses:
        table.add_row(
            s.name, str(s.position), str(s.head), str(s.lag_events), f"{s.lag_seconds:.3f}"
        )
    out.print(table)


@projections_app.command("rebuild")
@handles_errors
def projections_rebuild(
    name: Annotated[str, typer.Argument(help="Projection name (see `projections status`).")],
    as_json: JsonOption = False,
) -> None:
    """Rebuild a projection from position 0 into new tables and switch over atomically."""
    from rich.progress import Progress

    from projections import VIEWS, rebuild

    view_class = VIEWS.get(name)
    if view_class is None:
        _fail(f"unknown projection {name!r}", f"one of: {', '.join(VIEWS)}", EXIT_NOT_FOUND)
        return
    with open_ledger() as (_, led), Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"rebuilding {name}", total=None)
        position = rebuild(
            led,
            view_class,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    if as_json:
        print_json({"name": name, "position": position})
    else:
        out.print(f"[green]rebuilt[/] {name} up to log position {position} and switched over")


@app.command()
@handles_errors
def memory(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    recall: Annotated[str | None, typer.Option(help="Rank memories by relevance to this.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=20, help="Memories to recall.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """Bring the memory view up to date, write the agent's MEMORY.md, list or recall memories."""
    from projections import MemoryStore, MemoryView, ProjectionRunner, view_options
    from projections.memory import render_memory_files

    config = load_config()
    with open_ledger(config) as (_, led):
        led.load_agent(agent)
        view = MemoryView(led.recorder.datastore, **view_options(MemoryView.name, config))
        view.create_table()
        with err.status("updating the memory view…"):
            ProjectionRunner(led, view).catch_up()
        memory_md, archive = render_memory_files(view, agent, config.data_path / "memory" / agent)
        store = MemoryStore(view, half_life_days=config.memory.half_life_days)
        result = store.recall(agent, recall, limit=limit) if recall is not None else None
    if as_json:
        print_json(
            {
                "agent": agent,
                "memory_md": str(memory_md),
                "archive": str(archive),
                "recall": None
                if result is None
                else {
                    "query": recall,
                    "warning": result.warning,
                    "memories": [m.__dict__ for m in result.memories],
                },
            }
        )
        return
    if result is not None:
        table = Table(title=f"{agent} recalls: {recall!r}")
        for column in ("relevance", "similarity", "when", "tags", "content"):
            table.add_column(column, overflow="fold" if column == "content" else "ellipsis")
        for m in result.memories:
            table.add_row(
                f"{m.relevance:.3f}",
                f"{m.similarity:.3f}",
                m.created_at.strftime("%Y-%m-%d %H:%M"),
                ", ".join(m.tags),
                m.content,
            )
        out.print(table)
        if result.warning:
            err.print(f"[yellow]warning:[/] {result.warning}")
    else:
        out.print(memory_md.read_text(encoding="utf-8"), markup=False, highlight=False)
    out.print(f"[dim]MEMORY.md: {memory_md}\narchive:   {archive}[/]")


@bench_app.command("ledger")
@handles_errors
def bench_ledger(
    events_per_writer: Annotated[
        int, typer.Option(help="Events each writer process appends.")
    ] = 3000,
    rehydrate_events: Annotated[
        int, typer.Option(help="Size of the agent to rehydrate.")
    ] = 100_000,
    as_json: JsonOption = False,
) -> None:
    """OwlClaw vs stock recorder throughput (1 and 8 writer processes) and rehydration time."""
    from owlclaw.bench import ledger as bench

    with bench_database("owlclaw_bench_ledger") as url, err.status("benchmarking…") as status:
        result = bench.run(
            url,
            events_per_writer=events_per_writer,
            rehydrate_events=rehydrate_events,
            progress=status.update,
        )
    if as_json:
        print_json(result)
        return
    table = Table(title="ledger append throughput (events/s)")
    table.add_column("recorder")
    for label in ("1w_batch1", "8w_batch1", "8w_batch10"):
        table.add_column(label, justify="right")
    for kind, rates in result["events_per_second"].items():
        table.add_row(kind, *(str(v) for v in rates.values()))
    out.print(table)
    out.print(f"ratio owlclaw/stock: {result['ratio_owlclaw_over_stock']}")
    out.print(f"rehydration: {result['rehydration']}")


@bench_app.command("projections")
@handles_errors
def bench_projections(
    events: Annotated[int, typer.Option(help="Ledger size to catch up over.")] = 100_000,
    memories: Annotated[int, typer.Option(help="Memory store size for recall.")] = 1_000_000,
    as_json: JsonOption = False,
) -> None:
    """View catch-up speed, recall latency in a large store, remember-to-recallable time."""
    from owlclaw.bench import projections as bench

    with bench_database("owlclaw_bench_projections") as url, err.status("benchmarking…") as s:
        result = bench.run(url, events=events, memories=memories, progress=s.update)
    if as_json:
        print_json(result)
        return
    table = Table(title=f"projection catch-up over {events:,} events")
    for column in ("view", "events applied", "seconds", "log events/s"):
        table.add_column(column, justify="left" if column == "view" else "right")
    for name, r in result["catch_up"].items():
        table.add_row(
            name, str(r["events_applied"]), str(r["seconds"]), str(r["log_events_per_second"])
        )
    out.print(table)


@bench_app.command("runtime")
@handles_errors
def bench_runtime(
    runs: Annotated[int, typer.Option(help="Runs of 10 tool steps each.")] = 60,
    as_json: JsonOption = False,
) -> None:
    """Decision-loop overhead: tool step, commits per step, run start, litellm's share."""
    from owlclaw.bench import runtime as bench

    with bench_database("owlclaw_bench_runtime") as url, err.status("benchmarking…"):
        result = bench.run(url, runs=runs)
    if as_json:
        print_json(result)
        return
    for key, value in result.items():
        out.print(f"{key}: {value}")


@bench_app.command("actors")
@handles_errors
def bench_actors(
    agents: Annotated[int, typer.Option(help="Agents in the shared placement.")] = 1000,
    registered: Annotated[int, typer.Option(help="Passivated agents with a timer.")] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Activation, memory, runs/s for dedicated and shared placement; registered agents held."""
    from owlclaw.bench import actors as bench

    with bench_database("owlclaw_bench_actors") as url, err.status("benchmarking…") as status:
        result = bench.run(
            Database(url), agents=agents, registered_agents=registered, progress=status.update
        )
    if as_json:
        print_json(result)
        return
    for key, value in result.items():
        out.print(f"{key}: {value}")


@bench_app.command("timers")
@handles_errors
def bench_timers(
    fires: Annotated[int, typer.Option(help="Fires per lateness measurement.")] = 200,
    pending: Annotated[int, typer.Option(help="Pending timers held during throughput.")] = 10_000,
    hatchet_bin: Annotated[
        Path | None, typer.Option(help="Hatchet engine binaries (default .owlclaw/bin if built).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Fire lateness of the built-in and Hatchet backends; built-in throughput under load."""
    from owlclaw.bench import timers as bench

    default_bin = load_config().data_path / "bin"
    if hatchet_bin is None and (default_bin / "hatchet-lite").is_file():
        hatchet_bin = default_bin
    server = open_database(load_config())  # the Hatchet engine gets a database of its own there
    with bench_database("owlclaw_bench_timers") as url, err.status("benchmarking…") as status:
        result = bench.run(
            server,
            Database(url),
            fires=fires,
            pending=pending,
            hatchet_bin=hatchet_bin,
            progress=status.update,
        )
    if as_json:
        print_json(result)
        return
    for key, value in result.items():
        out.print(f"{key}: {value}")


def main() -> None:
    app()
