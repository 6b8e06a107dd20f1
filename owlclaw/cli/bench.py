"""``owlclaw bench``: the measured figures of each part on this machine."""

from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from owlclaw.bench.catalog import ENTRIES, NAMES
from owlclaw.bench.suite import SuiteRun, decode_run, run_all, select
from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    JsonOption,
    bench_app,
    bench_database,
    err,
    fail,
    handles_errors,
    out,
    print_json,
)
from owlclaw.config import load_config


@bench_app.command("ledger")
@handles_errors
def bench_ledger(
    events_per_writer: Annotated[
        int, typer.Option(help="Events each writer process appends.")
    ] = 3000,
    rehydrate_events: Annotated[
        int, typer.Option(help="Size of the agent to rehydrate.")
    ] = 100_000,
    secrets: Annotated[
        int,
        typer.Option(
            min=0, help="Secrets known to the redactor when encoding an event (0: not measured)."
        ),
    ] = 3,
    as_json: JsonOption = False,
) -> None:
    """OwlClaw vs stock recorder throughput (1 and 8 writer processes, 1 or 8 agents each),
    rehydration time, and encoding an event with secrets known."""
    from owlclaw.bench import ledger as bench

    with bench_database("owlclaw_bench_ledger") as url, err.status("benchmarking…") as status:
        result = bench.run(
            url,
            events_per_writer=events_per_writer,
            rehydrate_events=rehydrate_events,
            progress=status.update,
            encrypt=load_config().ledger.encrypt,
            secrets=secrets,
        )
    if as_json:
        print_json(result)
        return
    table = Table(title="ledger append throughput (events/s)")
    table.add_column("recorder")
    for label, *_ in bench.SCENARIOS:
        table.add_column(label, justify="right")
    for kind, rates in result["events_per_second"].items():
        table.add_row(kind, *(str(v) for v in rates.values()))
    out.print(table)
    out.print(f"ratio owlclaw/stock: {result['ratio_owlclaw_over_stock']}")
    out.print(f"rehydration: {result['rehydration']}")
    out.print(f"encode (encrypt={result['encrypt']}): {result['encode_us_per_event']} µs/event")
    if redacting := result["encode_with_secrets"]:
        out.print(
            f"encode with {redacting['secrets_known']:.0f} secrets known: "
            f"{redacting['us_per_event_holding_none']} µs/event holding none, "
            f"{redacting['us_per_event_holding_one']} holding one"
        )


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
    runs: Annotated[int, typer.Option(min=1, help="Runs of 10 tool steps each.")] = 60,
    openai: Annotated[
        bool,
        typer.Option(
            "--openai",
            help="Through litellm's OpenAI client to a loopback server, against a bare "
            "litellm loop.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Decision-loop overhead: tool step, commits per step, run start, litellm's share; with
    --openai, OwlClaw's durable step against a bare litellm loop on one OpenAI-compatible
    server."""
    from owlclaw.bench import runtime, runtime_openai

    with bench_database("owlclaw_bench_runtime") as url, err.status("benchmarking…"):
        result = (
            runtime_openai.run(url, runs=runs)
            if openai
            else runtime.run(url, runs=runs, encrypt=load_config().ledger.encrypt)
        )
    print_figures(result, as_json)


@bench_app.command("batch")
@handles_errors
def bench_batch(
    runs: Annotated[int, typer.Option(min=1, help="Runs of each case.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Parallel calls: the tools' wall time of one response with five 200 ms parallel_safe
    calls (limit 5, the default, 1), and the loop's overhead per call in a batch and alone."""
    from owlclaw.bench import batch

    with bench_database("owlclaw_bench_batch") as url, err.status("benchmarking…"):
        result = batch.run(url, runs=runs, encrypt=load_config().ledger.encrypt)
    print_figures(result, as_json)


@bench_app.command("tracing")
@handles_errors
def bench_tracing(
    runs: Annotated[int, typer.Option(min=1, max=1000, help="Runs of 10 tool steps each.")] = 30,
    as_json: JsonOption = False,
) -> None:
    """Tool-step time with tracing off and with OTLP export to a loopback receiver."""
    from owlclaw.bench import tracing as bench

    with bench_database("owlclaw_bench_tracing") as url, err.status("benchmarking…"):
        result = bench.run(url, runs=runs)
    print_figures(result, as_json)


@bench_app.command("mcp")
@handles_errors
def bench_mcp(
    runs: Annotated[int, typer.Option(min=1, max=1000, help="Runs of 10 calls per kind.")] = 30,
    servers: Annotated[
        Path,
        typer.Option(
            help="Where `make mcp-servers` put the npm servers' launchers.",
            envvar="OWLCLAW_MCP_BIN",
        ),
    ] = Path(".owlclaw/mcp/node_modules/.bin"),
    as_json: JsonOption = False,
) -> None:
    """The overhead of a tool call to an MCP server (server-everything's echo, over stdio and
    streamable HTTP) over a built-in tool's, through the whole pipeline: p50/p95 per step."""
    from owlclaw.bench import mcp as bench

    with bench_database("owlclaw_bench_mcp") as url, err.status("benchmarking…"):
        result = bench.run(url, servers.resolve(), runs=runs)
    print_figures(result, as_json)


@bench_app.command("eval")
@handles_errors
def bench_eval(
    runs: Annotated[int, typer.Option(min=1, help="Recorded runs to re-decide.")] = 1000,
    concurrency: Annotated[int, typer.Option(min=1, max=32, help="Runs re-decided at once.")] = 4,
    as_json: JsonOption = False,
) -> None:
    """Decisions re-asked per second with a zero-latency scripted model (the cost of rebuilding
    each decision's context from the ledger), with its method."""
    from owlclaw.bench import evals as bench

    with bench_database("owlclaw_bench_eval") as url, err.status("benchmarking…"):
        result = bench.run(url, runs=runs, concurrency=concurrency)
    print_figures(result, as_json)


@bench_app.command("actors")
@handles_errors
def bench_actors(
    agents: Annotated[int, typer.Option(help="Agents in the shared placement.")] = 1000,
    registered: Annotated[int, typer.Option(help="Passivated agents with a timer.")] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Activation, memory, runs/s for dedicated and shared placement; registered agents held."""
    from owlclaw.bench import actors as bench
    from owlclaw.database import Database

    with bench_database("owlclaw_bench_actors") as url, err.status("benchmarking…") as status:
        result = bench.run(
            Database(url), agents=agents, registered_agents=registered, progress=status.update
        )
    print_figures(result, as_json)


@bench_app.command("registry")
@handles_errors
def bench_registry(
    agents: Annotated[int, typer.Option(help="Agents to register.")] = 100_000,
    as_json: JsonOption = False,
) -> None:
    """Registration rate, database size, `owlclaw status --json` time and the console's agents
    page time with many registered, passivated agents."""
    from owlclaw.bench import registry as bench
    from owlclaw.database import Database

    with bench_database("owlclaw_bench_registry") as url, err.status("benchmarking…") as status:
        result = bench.run(Database(url), agents=agents, progress=status.update)
    print_figures(result, as_json)


@bench_app.command("archive")
@handles_errors
def bench_archive(
    runs: Annotated[int, typer.Option(min=1, help="Ended runs of the one agent.")] = 10_000,
    as_json: JsonOption = False,
) -> None:
    """Database size before and after archiving an agent's ended runs (after VACUUM and after
    VACUUM FULL), the archive's bytes on disk, and how long archiving and verify take."""
    from owlclaw.bench import archive as bench

    with bench_database("owlclaw_bench_archive") as url, err.status("benchmarking…") as status:
        result = bench.run(url, runs=runs, progress=status.update)
    print_figures(result, as_json)


@bench_app.command("timers")
@handles_errors
def bench_timers(
    fires: Annotated[int, typer.Option(help="Fires per lateness measurement.")] = 200,
    pending: Annotated[int, typer.Option(help="Pending timers held during throughput.")] = 10_000,
    due: Annotated[int, typer.Option(min=1, help="Due fires timed for throughput.")] = 1000,
    restart_fires: Annotated[
        int, typer.Option(min=0, help="Hatchet fires either side of an engine restart (0: none).")
    ] = 40,
    hosts: Annotated[int, typer.Option(min=1, help="Shared host actors the fires go to.")] = 4,
    hatchet_bin: Annotated[
        Path | None, typer.Option(help="Hatchet engine binaries (default .owlclaw/bin if built).")
    ] = None,
    background_load: Annotated[
        int, typer.Option(min=0, help="Cores kept busy by burner processes while measuring.")
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Fire lateness of the built-in and Hatchet backends; built-in throughput under load."""
    from owlclaw.bench import timers as bench
    from owlclaw.database import Database, open_database
    from owlclaw.timers.hatchet_engine import missing_binaries

    default_bin = load_config().data_path / "bin"
    if hatchet_bin is None and not missing_binaries(default_bin):
        hatchet_bin = default_bin
    server = open_database(load_config())  # the Hatchet engine gets a database of its own there
    with bench_database("owlclaw_bench_timers") as url, err.status("benchmarking…") as status:
        result = bench.run(
            server,
            Database(url),
            fires=fires,
            pending=pending,
            due=due,
            restart_fires=restart_fires,
            hosts=hosts,
            hatchet_bin=hatchet_bin,
            background_load=background_load,
            progress=status.update,
        )
    print_figures(result, as_json)


@bench_app.command("cli")
@handles_errors
def bench_cli(
    repeat: Annotated[int, typer.Option(min=1, max=50, help="Processes per command.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """Seconds each reading command, `memory --recall` and `replay --verify` take as a new
    process, with `owlclaw run` serving the agent and without a server (median of --repeat)."""
    from owlclaw.bench import cli as bench
    from owlclaw.database import Database

    with bench_database("owlclaw_bench_cli") as url, err.status("benchmarking…") as status:
        result = bench.run(Database(url), repeat=repeat, progress=status.update)
    print_figures(result, as_json)


@bench_app.command("all")
@handles_errors
def bench_all(
    quick: Annotated[
        bool, typer.Option("--quick", help="Smaller sizes: the whole run in ~3 min on 2 cores.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(help=f"Comma-separated benches to run, of: {', '.join(NAMES)} (default all)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON result to this file.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Every headline figure in one run, each with its method and the machine's load while it
    ran (for `owlclaw bench docs`). Exits 1 if a bench failed (its error is in the result)."""
    try:
        entries = select(ENTRIES, only)
    except ValueError as e:
        fail(str(e), "pass --only with names from the list, comma-separated", EXIT_USAGE)
    with err.status("benchmarking…") as status:
        result = run_all(entries, quick=quick, scratch=bench_database, progress=status.update)
    if output is not None:
        output.write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    if as_json:
        print_json(result)
    else:
        out.print(suite_table(result))
    if failed := [b.bench for b in result.benches if b.error is not None]:
        fail(f"{', '.join(failed)} failed", "see each bench's error in the result", EXIT_FAILED)


@bench_app.command("docs")
@handles_errors
def bench_docs(
    results: Annotated[
        list[Path], typer.Argument(help="`bench all --json` outputs; a bench's latest run wins.")
    ],
    output: Annotated[Path, typer.Option("--out", help="The page to write.")] = Path(
        "docs/benchmarks.md"
    ),
) -> None:
    """Write the benchmark page from `owlclaw bench all --json` outputs."""
    from owlclaw.bench.page import render

    runs = []
    for path in results:
        try:
            runs.append(decode_run(path.read_bytes()))
        except (OSError, msgspec.DecodeError) as e:
            fail(f"{path}: {e}", "pass files written by `owlclaw bench all --json`", EXIT_USAGE)
    output.write_text(render(runs, ENTRIES))
    err.print(f"wrote {output}")


def suite_table(result: SuiteRun) -> Table:
    """``bench all``'s figures for a person: each bench's duration and load beside its name."""
    from owlclaw.bench.page import shown_value

    table = Table(title=f"bench all{' --quick' if result.quick else ''}: {result.duration_s:g} s")
    for column in ("bench", "figure", "value"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for bench in result.benches:
        load = bench.load
        label = (
            f"{bench.bench}\n[dim]{bench.duration_s:g} s, load {load.load1_before:g}→"
            f"{load.load1_after:g}, CPU {load.cpu_busy_share:.0%} busy[/]"
        )
        if bench.error is not None:
            table.add_row(label, f"[red]failed: {escape(bench.error)}[/]", "")
        for i, figure in enumerate(bench.figures):
            table.add_row(label if i == 0 else "", figure.name, shown_value(figure))
        table.add_section()
    return table


def print_figures(result: dict[str, Any], as_json: bool) -> None:
    """A benchmark's figures: JSON, or one ``name: value`` line each."""
    if as_json:
        print_json(result)
        return
    for key, value in result.items():
        out.print(f"{key}: {value}")


@bench_app.command("startup")
@handles_errors
def bench_startup(
    runs: Annotated[int, typer.Option(min=1, help="Timed starts per placement.")] = 3,
    placement: Annotated[
        list[str] | None,
        typer.Option(
            help="local | ray | hatchet (local, Hatchet timers); repeatable (default: local, ray)."
        ),
    ] = None,
    imports: Annotated[
        bool, typer.Option(help="List the heavy modules imported before serving.")
    ] = True,
    own_data: Annotated[
        bool,
        typer.Option(
            "--own-data/--shared-data",
            help="Each placement on a data directory of its own, created by a first start of "
            "its own (--shared-data: the first placement's, as `bench all --quick`).",
        ),
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Seconds from `owlclaw run` of a scaffolded app to serving (`/status` with every worker
    running) and from SIGTERM to exit, with local and Ray (shared) placement (and the Hatchet
    timer backend if asked); the server's per-phase timings; the heavy modules imported before
    serving."""
    from owlclaw.bench import startup as bench

    placements = tuple(placement or bench.DEFAULT)
    unknown = [p for p in placements if p not in bench.PLACEMENTS]
    if unknown:
        hint = f"one of {', '.join(bench.PLACEMENTS)}"
        fail(f"unknown placement {unknown[0]!r}", hint, EXIT_USAGE)
    with err.status("benchmarking…") as status:
        result = bench.run(
            placements=placements,
            runs=runs,
            imports=imports,
            own_data=own_data,
            progress=status.update,
        )
    print_figures(result, as_json)
