"""The benches of ``owlclaw bench all``, in the order they run, and their headline figures.

Adding one is one ``Entry``: a ``run(url, **sizes) -> dict`` (its module imported inside it, so
that the CLI's start does not pay for it), full and quick sizes, and the result's keys that hold
its headline figures. Full sizes are the ``owlclaw bench NAME`` defaults; quick ones keep the
whole ``bench all --quick`` short (153-157 s on the 2 cores the committed result ran on, 256 s
on a machine ~1.7x slower; most of it process starts, litellm imports and timers' lead times).
A unit test reads the committed real result (tests/data/bench/all-quick.json) for every
entry's figures at its quick sizes: after adding an entry or changing its sizes, run
``owlclaw bench all --quick --json --out tests/data/bench/all-quick.json`` again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from owlclaw.bench.suite import Entry, Headline
from owlclaw.config import load_config


def _ledger(url: str, events_per_writer: int, rehydrate_events: int) -> dict[str, Any]:
    from owlclaw.bench import ledger

    return ledger.run(
        url,
        events_per_writer=events_per_writer,
        rehydrate_events=rehydrate_events,
        encrypt=load_config().ledger.encrypt,
    )


def _runtime(url: str, **sizes: int) -> dict[str, Any]:
    from owlclaw.bench import runtime

    return runtime.run(url, encrypt=load_config().ledger.encrypt, **sizes)


def _runtime_openai(url: str, **sizes: int) -> dict[str, Any]:
    from owlclaw.bench import runtime_openai

    return runtime_openai.run(url, **sizes)


def _batch(url: str, **sizes: int) -> dict[str, Any]:
    from owlclaw.bench import batch

    return batch.run(url, encrypt=load_config().ledger.encrypt, **sizes)


def _projections(url: str, events: int, memories: int) -> dict[str, Any]:
    from owlclaw.bench import projections

    return projections.run(url, events=events, memories=memories)


def _timers(
    url: str, fires: int, pending: int, restart_fires: int, due: int, hosts: int
) -> dict[str, Any]:
    """Both backends; Hatchet's figures only where its engine is built (``OWLCLAW_HATCHET_BIN``,
    else ``<data_dir>/bin``)."""
    from owlclaw.bench import timers
    from owlclaw.database import Database, open_database
    from owlclaw.timers.hatchet_engine import missing_binaries

    config = load_config()
    hatchet_bin = Path(os.environ.get("OWLCLAW_HATCHET_BIN") or config.data_path / "bin")
    return timers.run(
        open_database(config),
        Database(url),
        fires=fires,
        pending=pending,
        hatchet_bin=None if missing_binaries(hatchet_bin) else hatchet_bin,
        restart_fires=restart_fires,
        due=due,
        hosts=hosts,
    )


def _actors(
    url: str, agents: int, pool: int, dedicated_agents: int, registered_agents: int, idle_s: int
) -> dict[str, Any]:
    from owlclaw.bench import actors
    from owlclaw.database import Database

    return actors.run(
        Database(url),
        agents=agents,
        pool=pool,
        dedicated_agents=dedicated_agents,
        registered_agents=registered_agents,
        idle_s=idle_s,
    )


def _startup(url: str, runs: int, imports: int, own_data: int) -> dict[str, Any]:
    """``owlclaw run`` in new processes on data of its own (its embedded PostgreSQL): ``url``
    is not used."""
    from owlclaw.bench import startup

    return startup.run(runs=runs, imports=bool(imports), own_data=bool(own_data))


def _cli(url: str, repeat: int) -> dict[str, Any]:
    from owlclaw.bench import cli
    from owlclaw.database import Database

    return cli.run(Database(url), repeat=repeat)


def _p(name: str, path: str, unit: str, method: str) -> Headline:
    return Headline(name=name, path=path, unit=unit, method=method)


ENTRIES: tuple[Entry, ...] = (
    Entry(
        name="ledger",
        title="Ledger",
        note="OwlClaw's recorder against the stock eventsourcing recorder on the same database, "
        "and loading a large agent back.",
        method="writer processes append one event per commit ({events_per_writer} each, five "
        "times that in batches of 10), OwlClaw's recorder then the stock one; an agent of "
        "{rehydrate_events:,} events (snapshot every 100) is loaded back",
        run=_ledger,
        full={"events_per_writer": 3000, "rehydrate_events": 100_000},
        quick={"events_per_writer": 200, "rehydrate_events": 10_000},
        headlines=(
            _p(
                "ratio vs stock, 8 writers x 8 agents",
                "ratio_owlclaw_over_stock.8_writers_8_agents_each",
                "x",
                "group commit applies: 8 agents (threads) per writer process",
            ),
            _p(
                "ratio vs stock, 8 writers",
                "ratio_owlclaw_over_stock.8_writers",
                "x",
                "one stream per writer process",
            ),
            _p(
                "ratio vs stock, 1 writer",
                "ratio_owlclaw_over_stock.1_writer",
                "x",
                "one writer process, one stream",
            ),
            _p(
                "appends, 8 writers x 8 agents",
                "events_per_second.owlclaw.8w_8agents_batch1",
                "events/s",
                "OwlClaw's recorder, one event per append",
            ),
            _p(
                "rehydration",
                "rehydration.load_ms",
                "ms",
                "snapshot + tail, median of repeated loads",
            ),
        ),
    ),
    Entry(
        name="runtime",
        title="Runtime",
        note="The decision loop's own cost around the model: a scripted model at zero latency, "
        "durable appends.",
        method="{runs} runs of one agent, 10 log_decision tool steps each, scripted model at "
        "zero latency; figures from the recorded events",
        run=_runtime,
        full={"runs": 60},
        quick={"runs": 15},
        headlines=(
            _p(
                "tool step overhead p50",
                "tool_step_overhead.p50_ms",
                "ms",
                "one model call's end to the next one's start",
            ),
            _p("tool step overhead p95", "tool_step_overhead.p95_ms", "ms", "as p50"),
            _p(
                "run start p50",
                "run_start_latency.p50_ms",
                "ms",
                "run() called to the first model request",
            ),
            _p(
                "tool calls/s, one agent",
                "tool_calls_per_second_one_agent",
                "calls/s",
                "runs one after the other",
            ),
            _p(
                "litellm added per call p50",
                "litellm_added_per_call_ms_p50",
                "ms",
                "acompletion minus the provider called directly",
            ),
        ),
    ),
    Entry(
        name="runtime-openai",
        title="Runtime through an OpenAI-compatible server",
        note="OwlClaw's durable step against a bare litellm loop, both through litellm's "
        "OpenAI client to one loopback server.",
        method="{runs} OwlClaw runs of 10 tool steps alternating with bare litellm loops "
        "(same messages, tools and results, nothing kept); a step is the gap between two "
        "requests at the server",
        run=_runtime_openai,
        full={"runs": 60},
        quick={"runs": 15},
        headlines=(
            _p("OwlClaw step p50", "owlclaw_step.p50_ms", "ms", "durable step"),
            _p("bare litellm step p50", "bare_litellm_step.p50_ms", "ms", "nothing kept"),
            _p(
                "added per step p50",
                "owlclaw_added_per_step_ms.p50",
                "ms",
                "OwlClaw's step minus the bare loop's",
            ),
            _p("added per step p95", "owlclaw_added_per_step_ms.p95", "ms", "as p50"),
        ),
    ),
    Entry(
        name="batch",
        title="Parallel tool calls",
        note="One response carrying five independent calls of a parallel_safe capability.",
        method="{runs} runs per case: five calls that sleep 200 ms each in one response; "
        "then instant calls, in a batch of five and alone",
        run=_batch,
        full={"runs": 20},
        quick={"runs": 5},
        headlines=(
            _p(
                "5 x 200 ms calls, tools' wall p50",
                "tools_wall_time.parallel_tool_calls=5.p50_ms",
                "ms",
                "first call started to last finished, parallel_tool_calls = 5",
            ),
            _p(
                "overhead per call in a batch of 5 p50",
                "overhead_per_call_in_a_batch_of_5.p50_ms",
                "ms",
                "response to next request, divided by the calls",
            ),
            _p(
                "overhead per call alone p50",
                "overhead_per_call_alone.p50_ms",
                "ms",
                "response to next request, one call",
            ),
        ),
    ),
    Entry(
        name="projections",
        title="Projections",
        note="Recall in a large memory store, how soon a memory is recallable, and how fast "
        "each view catches up over the log.",
        method="catch-up over {events:,} events; recall of an agent's 10,000 memories in a store "
        "of {memories:,} (synthetic vectors, real query embeddings); remember → recallable over "
        "60 memories",
        run=_projections,
        full={"events": 100_000, "memories": 1_000_000},
        quick={"events": 5_000, "memories": 50_000},
        headlines=(
            _p(
                "recall p95",
                "recall.recall_including_embedding.p95_ms",
                "ms",
                "including the query's embedding",
            ),
            _p(
                "recall index query p95",
                "recall.index_query.p95_ms",
                "ms",
                "the vector index query alone",
            ),
            _p(
                "remember → recallable p95",
                "remember_to_recallable.commit_to_recall_returned.p95_ms",
                "ms",
                "MemoryRemembered committed to recall returning it",
            ),
            _p(
                "catch-up, audit view",
                "catch_up.audit.log_events_per_second",
                "log events/s",
                "from empty",
            ),
            _p(
                "catch-up, runs view",
                "catch_up.runs.log_events_per_second",
                "log events/s",
                "from empty",
            ),
            _p(
                "catch-up, memory view",
                "catch_up.memory.log_events_per_second",
                "log events/s",
                "from empty, embedding each memory",
            ),
        ),
    ),
    Entry(
        name="timers",
        title="Timers",
        note="Fire lateness (scheduled time → TimerFired) on both backends, each fire starting "
        "a run on shared Ray host actors; built-in throughput while holding pending timers. "
        "Hatchet's figures need the engine `make test` builds (`<data_dir>/bin`, or "
        "`OWLCLAW_HATCHET_BIN`).",
        method="{fires} fires over 20 agents on {hosts} shared host actors, per backend; Hatchet's "
        "engine restarted with {restart_fires} fires either side of it (0: not restarted); "
        "{due:,} due fires while {pending:,} timers are pending",
        run=_timers,
        full={"fires": 200, "pending": 10_000, "restart_fires": 40, "due": 1000, "hosts": 4},
        quick={"fires": 40, "pending": 1_000, "restart_fires": 0, "due": 200, "hosts": 2},
        headlines=(
            _p("built-in lateness p50", "builtin.lateness.p50_ms", "ms", "built-in backend"),
            _p("built-in lateness p99", "builtin.lateness.p99_ms", "ms", "built-in backend"),
            _p("Hatchet lateness p50", "hatchet.lateness.p50_ms", "ms", "Hatchet engine"),
            _p("Hatchet lateness p99", "hatchet.lateness.p99_ms", "ms", "Hatchet engine"),
            _p(
                "built-in fires/s",
                "builtin.throughput.fires_per_second",
                "fires/s",
                "each fire records TimerFired and runs the agent once",
            ),
        ),
        fresh_process=True,
    ),
    Entry(
        name="actors",
        title="Actors",
        note="Shared placement (agents multiplexed on host actors) and dedicated placement "
        "(an actor per agent) on a local Ray cluster.",
        method="shared: {agents:,} agents on {pool} host actors, one one-tool run each, all "
        "submitted at once, then activated again once passivated ({idle_s} s idle); "
        "dedicated: {dedicated_agents} actors; {registered_agents:,} registered passivated "
        "agents with a pending timer",
        run=_actors,
        full={
            "agents": 1000,
            "pool": 2,
            "dedicated_agents": 3,
            "registered_agents": 10_000,
            "idle_s": 30,
        },
        quick={
            "agents": 200,
            "pool": 2,
            "dedicated_agents": 2,
            "registered_agents": 300,
            "idle_s": 20,
        },
        headlines=(
            _p(
                "shared runs/s",
                "shared.runs_per_second_across_1000_agents",
                "runs/s",
                "every agent's run at once",
            ),
            _p(
                "shared activation p95",
                "shared.activation_from_passivated_ms.p95_ms",
                "ms",
                "from passivated",
            ),
            _p(
                "OwlClaw's CPU over litellm's",
                "shared.owlclaw_to_litellm_cpu_ratio",
                "x",
                "hosts' CPU per run minus litellm's and Ray's handling of its ask, over "
                "litellm's, measured in the same run",
            ),
            _p(
                "OwlClaw's and Ray's CPU over litellm's",
                "shared.owlclaw_and_ray_to_litellm_cpu_ratio",
                "x",
                "the same, Ray's handling of the asks counted in (the ratio until 2026-12-01)",
            ),
            _p(
                "hosts' CPU per run",
                "shared.hosts_cpu_per_run_ms",
                "ms",
                "the host actors' processes, /proc/<pid>/stat",
            ),
            _p(
                "litellm CPU per call",
                "shared.litellm_cpu_per_call_ms",
                "ms",
                "in each host after the runs, the call its runs make",
            ),
            _p(
                "Ray's CPU per ask in a host",
                "shared.ray_cpu_per_ask_ms",
                "ms",
                "in each host after the runs, asks it answers at once, as many in flight",
            ),
            _p(
                "shared CPU ceiling",
                "shared.runs_per_second_cpu_ceiling",
                "runs/s",
                "cores x 1,000 ms over OwlClaw's CPU per run",
            ),
            _p(
                "dedicated actor memory",
                "dedicated.rss_per_active_agent_mb",
                "MB",
                "VmRSS of an agent's actor",
            ),
            _p(
                "dedicated cold start p50",
                "dedicated.activation_cold_ms.p50_ms",
                "ms",
                "a new agent's first activation",
            ),
        ),
        fresh_process=True,
    ),
    Entry(
        name="startup",
        title="Start-up",
        note="`owlclaw run` of one app until `/status` shows every worker up, with local "
        "placement and on Ray; the embedding model and litellm load after it serves.",
        method="median of {runs} starts after a first one (which creates the database; "
        "own_data 1: one per placement, 0: the placements share the first's), each a new "
        "process on an app made by `owlclaw init`; stop is SIGTERM to exit once loaded",
        run=_startup,
        full={"runs": 3, "imports": 1, "own_data": 1},
        quick={"runs": 1, "imports": 0, "own_data": 0},
        headlines=(
            _p("serving, local", "local_serving_s", "s", "process start to every worker up"),
            _p("serving, Ray", "ray_serving_s", "s", "as local, shared placement"),
            _p("stop, local", "local_stop_s", "s", "SIGTERM to exit"),
        ),
    ),
    Entry(
        name="cli",
        title="CLI latency",
        note="Each command as a user runs it: a new process, with `owlclaw run` serving the "
        "agent (it answers each command) and without a server.",
        method="`owlclaw CMD --json` in a new process, median of {repeat}; an agent with a "
        "10-step run and memories",
        run=_cli,
        full={"repeat": 5},
        quick={"repeat": 1},
        headlines=(
            _p("slowest read, served", "slowest_read_served_s", "s", "a server running"),
            _p("memory --recall, served", "recall_served_s", "s", "a server running"),
            _p("replay --verify, served", "verify_served_s", "s", "10-step run"),
            _p("slowest read, alone", "slowest_read_alone_s", "s", "no server"),
            _p("memory --recall, alone", "recall_alone_s", "s", "no server"),
            _p("replay --verify, alone", "verify_alone_s", "s", "10-step run, no server"),
        ),
    ),
)

NAMES = tuple(entry.name for entry in ENTRIES)
