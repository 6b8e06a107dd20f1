"""Reading what happened: ledger, verify, replay, schedules, projections, memory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from events import LoggedEvent
from events.catalog import event_fields
from events.heads import AnchorInvalid, read_anchor
from owlclaw.audit.chains import verify_agent
from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOption,
    app,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    projections_app,
    summary,
)
from owlclaw.cli.tables import recall_table, stacked, text, whole
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.reports.relative_time import relative
from owlclaw.tools.subagents import SpawnNode, spawn_tree

if TYPE_CHECKING:
    from owlclaw.audit.redecide import ReDecision
    from owlclaw.audit.verify import ReplayReport
    from owlclaw.compose.read import ConfiguredView
    from projections.runner import ProjectionStatus


@app.command()
@handles_errors
def ledger(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    after: Annotated[
        int, typer.Option(min=0, help="Start after this log position (a page's next_after).")
    ] = 0,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many events.")] = 200,
    every: Annotated[bool, typer.Option("--all", help="Show every event (no --limit).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Print an agent's events (its stream and its runs' streams) in log order, a page at a
    time: the first --limit events after --after, and where the next page starts."""
    with open_ledger() as (_, led):
        history = led.agent_history(agent, after, None if every else limit + 1)
        tree = spawn_tree(led, agent)
        runs = {run_id: n for n, run_id in enumerate(led.load_agent(agent).run_ids(), 1)}
    more = len(history) > limit and not every
    if more:
        history = history[:limit]
    next_after = history[-1].position if more else None
    if as_json:
        print_json(
            {
                "agent_id": agent,
                "events": [
                    {
                        "position": h.position,
                        "stream": h.event.originator_id,
                        "version": h.event.originator_version,
                        "type": type(h.event).__name__,
                        "timestamp": h.event.timestamp,
                        "data": event_fields(h.event),
                    }
                    for h in history
                ],
                "next_after": next_after,
            }
        )
        return
    out.print(ledger_table(agent, history, runs))
    if more:
        out.print(
            f"[yellow]{limit} events shown, more follow:[/] owlclaw ledger {escape(agent)}"
            f" --after {next_after} (or --all)",
            highlight=False,
        )
    if tree:
        out.print(_tree(Tree(f"sub-agents of {agent}"), tree))


def ledger_table(agent: str, history: list[LoggedEvent], runs: Mapping[UUID, int]) -> Table:
    """Each event's position and stream as ``--after``, ``replay`` and ``export`` take them
    (``runs``: the run number of each run stream), its data folded under its type."""
    table = Table(
        whole("pos"),
        whole("stream"),
        whole("ver"),
        whole("time"),
        text("event"),
        title=f"ledger of {agent}",
    )
    for h in history:
        e = h.event
        table.add_row(
            str(h.position),
            "agent" if e.stream == "agent" else f"run {runs[e.originator_id]}",
            str(e.originator_version),
            e.timestamp.strftime("%H:%M:%S.%f")[:-3],
            stacked(Text(type(e).__name__, "bold"), summary(event_fields(e))),
        )
    return table


def _tree(branch: Tree, nodes: list[SpawnNode]) -> Tree:
    for node in nodes:
        child = branch.add(
            escape(f"{node.agent_id} run {node.run_id[:8]} [{node.status}] {node.task[:60]}")
        )
        _tree(child, node.children)
    return branch


@app.command()
@handles_errors
def verify(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every stream).")] = None,
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Verify this evidence bundle offline (no database)."),
    ] = None,
    pubkey: Annotated[
        str | None,
        typer.Option("--pubkey", help="The bundle signer's public key (base64, or its file)."),
    ] = None,
    anchor_file: Annotated[
        Path | None,
        typer.Option(
            "--anchor",
            help="Check against this anchor (the JSON `owlclaw anchor --json` printed) instead "
            "of the latest one in the ledger.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute the hash chains (naming the first altered event of each stream), check each
    ended run against the head sealed on its agent's stream, and every stream against the
    latest anchor: a deleted tail or stream, or an event rewritten after the anchor, is named.
    With --bundle, check an exported bundle instead: its chains, manifest and signature."""
    if bundle is not None or pubkey is not None:
        if agent is not None or anchor_file is not None:
            fail(
                "--bundle verifies a file, not an agent or an anchor",
                "drop the agent argument and --anchor",
                EXIT_USAGE,
            )
        _verify_bundle_file(bundle, pubkey, as_json)
        return
    anchor = None
    if anchor_file is not None:
        try:
            anchor = read_anchor(anchor_file.read_bytes(), str(anchor_file))
        except OSError as e:
            fail(
                f"cannot read {anchor_file}: {e.strerror}", "pass an existing file", EXIT_NOT_FOUND
            )
        except AnchorInvalid as e:
            fail(str(e), "pass the JSON `owlclaw anchor --json` printed, unchanged", EXIT_USAGE)
    with open_ledger() as (_, led):
        report = verify_agent(led, agent, anchor)
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
                "mismatches": report.mismatches,
                "sealed_runs": report.sealed_runs,
                "anchor": report.anchor,
                "unreadable": report.unreadable,
            }
        )
    else:
        for b in report.breaks:
            out.print(f"[red]BROKEN[/] {escape(str(b))}")
        for m in report.mismatches:
            out.print(f"[red]MISMATCH[/] {escape(str(m))}")
        for u in report.unreadable:
            out.print(f"[yellow]unchecked[/] {escape(u)}")
        if report.ok:
            against = f"; every stream reaches {report.anchor}" if report.anchor else ""
            out.print(
                f"[green]ok[/]: {report.events} events in {report.streams} streams, chains "
                f"intact; {report.sealed_runs} ended runs match their sealed heads{against}"
            )
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _verify_bundle_file(bundle: Path | None, pubkey: str | None, as_json: bool) -> None:
    from owlclaw.audit.evidence.verify_bundle import BundleKeyError, parse_public_key, verify_bundle

    if bundle is None or pubkey is None:
        fail(
            "--bundle and --pubkey go together",
            "owlclaw verify --bundle FILE --pubkey KEY",
            EXIT_USAGE,
        )
    try:
        key = parse_public_key(pubkey)
        data = bundle.read_bytes()
    except (BundleKeyError, OSError) as e:
        fail(str(e), "pass the bundle file and the key `owlclaw keys init` printed", EXIT_USAGE)
    report = verify_bundle(data, key)
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "agent": report.agent,
                "streams": report.streams,
                "events": report.events,
                "key_id": report.key_id,
                "problems": [{**p.__dict__, "text": str(p)} for p in report.problems],
            }
        )
    elif report.ok:
        out.print(
            f"[green]ok[/]: {report.events} events in {report.streams} streams of"
            f" {escape(report.agent or '')}, chains intact, signed by key {report.key_id}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        for p in report.problems:
            out.print(f"[red]BROKEN[/] {escape(str(p))}", highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command()
@handles_errors
def anchor(as_json: JsonOption = False) -> None:
    """Record the head (last version and hash) of every stream in the ledger, and print it.
    Keep the printed JSON outside the database: `owlclaw verify --anchor FILE` then finds any
    later deletion or rewrite of what it covers, even if the anchor events are deleted too."""
    with open_ledger() as (_, led):
        anchored = led.anchor()
    if as_json:
        print_json(anchored)
        return
    for h in anchored.heads:
        out.print(f"{h.stream} {h.version} {h.hash}", highlight=False)
    out.print(
        f"anchor {anchored.anchor} at {anchored.at.isoformat()}: {len(anchored.heads)} streams, "
        f"digest {anchored.digest}",
        highlight=False,
    )


@app.command()
@handles_errors
def replay(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    run_no: Annotated[int, typer.Argument(min=1, help="Run number (1 = the agent's first run).")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Re-execute from the recorded steps and compare.")
    ] = False,
    app_dir: Annotated[
        Path | None,
        typer.Option(
            "--app", help="The agent's app directory (default: the one it was served from)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Re-ask this model (a litellm model string) at each recorded decision point,"
            " with the context the agent had then; no tool runs."
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="With --model: after the first divergence, follow the model's own branch while"
            " every tool it calls was recorded with the same arguments.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a recorded run step by step; with --verify, re-execute it without calling a model;
    with --model, ask another model what it would have decided at each step."""
    from events.streams import run_stream_id

    if model is not None or follow:
        if verify or model is None:
            fail("--model goes without --verify, --follow with --model", "see --help", EXIT_USAGE)
        redecide_run(agent, run_no, model, app_dir, follow=follow, as_json=as_json)
        return
    with open_ledger() as (_, led):
        state = led.load_agent(agent).state
        if run_no > state.run_count:
            fail(f"agent {agent} has no run {run_no}", f"`owlclaw ledger {agent}`", EXIT_NOT_FOUND)
        if app_dir is None and state.app_dir and Path(state.app_dir).is_dir():
            app_dir = Path(state.app_dir)
        events = led.stream(run_stream_id(agent, run_no))
        report = None
        if verify:
            from owlclaw.app import load_app
            from owlclaw.audit.verify import replay_run
            from owlclaw.runtime.app_code import AppCode

            limits = load_config().runtime
            loaded = load_app(app_dir) if app_dir is not None else None
            code = AppCode(limits.app_load_timeout_s)
            registry = code.load(loaded.handlers) if loaded and loaded.handlers else None
            report = replay_run(led, agent, run_no, app=loaded, registry=registry, limits=limits)
    if as_json:
        print_json(
            {
                "steps": [
                    {"type": type(e).__name__, "version": e.originator_version, **event_fields(e)}
                    for e in events
                ],
                "verify": None if report is None else report.__dict__,
            }
        )
    else:
        for e in events:
            line = summary(event_fields(e))
            out.print(f"{e.originator_version:>4} {type(e).__name__:<22} {line}")
        if report is not None and report.matched:
            out.print(f"[green]replay matches[/]: {report.compared} steps reproduced")
        elif report is not None:
            _print_differences(report)
    if report is not None and not report.matched:
        raise typer.Exit(EXIT_FAILED)


def _print_differences(report: ReplayReport) -> None:
    """Each difference as its two sides, numbered as the listing numbers the recorded step."""
    for difference in report.differences:
        head, *sides = str(difference).splitlines()
        out.print(f"[red]DIFFERS[/] {escape(head)}", highlight=False, soft_wrap=True)
        for side in sides:
            out.print(escape(side), highlight=False, soft_wrap=True)
    out.print(
        f"{len(report.differences)} differences: the record has {report.compared} steps,"
        f" the replay took {report.produced}",
        highlight=False,
    )


def redecide_run(
    agent: str, run_no: int, model: str, app_dir: Path | None, *, follow: bool, as_json: bool
) -> None:
    """``replay --model``: the per-step table (or JSON) of a run re-decided by ``model``; exit
    1 when it diverges."""
    import asyncio

    from owlclaw.audit.decision_points import AgentRecord
    from owlclaw.audit.redecide import redecide
    from owlclaw.llm.providers import litellm_with_offline_providers

    config = load_config()
    with open_ledger(config) as (_, led):
        record = AgentRecord.open(led, agent, config, app_dir)
        if not 1 <= run_no <= record.run_count:
            fail(f"agent {agent} has no run {run_no}", f"`owlclaw ledger {agent}`", EXIT_NOT_FOUND)
        litellm = litellm_with_offline_providers()

        async def redecided() -> ReDecision:
            context = await record.context(run_no)
            return await redecide(
                litellm,
                context,
                model,
                timeout_s=config.runtime.llm_timeout_s,
                follow=follow,
                max_branch_steps=config.runtime.max_function_calls,
            )

        report = asyncio.run(redecided())
    if as_json:
        print_json(report.as_dict())
    else:
        for note in report.drift:
            err.print(f"[yellow]context differs from the recording:[/] {escape(note)}")
        out.print(redecision_table(report))
        first = report.first_divergence
        if first is None:
            out.print(f"[green]no divergence[/]: {len(report.steps)} decisions as recorded")
        else:
            out.print(
                f"[red]first divergence at step {first.step}[/] ({report.outcome})",
                highlight=False,
            )
        if report.stopped:
            out.print(f"branch followed until: {escape(report.stopped)}")
    if report.first_divergence is not None:
        raise typer.Exit(EXIT_FAILED)


def redecision_table(report: ReDecision) -> Table:
    table = Table(
        whole("step"),
        text("recorded decision"),
        text("new decision"),
        whole(""),
        title=f"run {report.run_no} of {report.agent_id} re-decided by {report.model}",
    )
    for s in report.steps:
        new = str(s.candidate) if s.candidate is not None else f"({s.error})"
        mark = "[green]same[/]" if s.same else "[red]different[/]"
        table.add_row(
            f"{s.step}{' (branch)' if s.branch else ''}",
            escape(str(s.recorded) if s.recorded is not None else "-"),
            escape(new),
            mark,
        )
    return table


@app.command()
@handles_errors
def schedules(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every agent).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Include ended schedules.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Schedules with their next fire time, backend and last outcome."""
    from owlclaw.reports.inspection import open_schedules, schedules_of

    with open_ledger() as (_, led):
        listing = schedules_of(led, open_schedules(led), agent, every)
    if listing.behind:
        err.print(f"[yellow]warning:[/] {listing.behind}")
    if as_json:
        print_json(listing.rows)
        return
    out.print(schedules_table(agent, listing.rows))


def schedules_table(agent: str | None, rows: list[dict[str, Any]]) -> Table:
    """A schedule's agent under its id (unless ``agent`` names it), its next fire under its
    cron, its backend and misfires under its status, its last outcome under its focus."""
    table = Table(
        whole("schedule"),
        whole("fires"),
        whole("status"),
        text("focus"),
        title="schedules" + (f" of {agent}" if agent else ""),
    )
    for r in rows:
        next_fire, misses, last = r["next_fire_at"], r["misses"], r["last_outcome"]
        table.add_row(
            stacked(r["schedule_id"], None if agent else Text(r["agent_id"], "dim")),
            stacked(r["cron"] or r["kind"], f"next {relative(next_fire)}" if next_fire else None),
            stacked(r["status"], r["backend"], f"{misses} missed" if misses else None),
            stacked(r["focus"], Text(f"last: {last}", "dim") if last else None),
        )
    return table


def first_line(error: str) -> str:
    """An error's headline (a database error goes on with DETAIL lines; --json has them)."""
    return error.splitlines()[0] if error else error


@projections_app.command("status")
@handles_errors
def projections_status(as_json: JsonOption = False) -> None:
    """Position, lag (events and seconds behind the log head) and parked events of every
    projection."""
    from owlclaw.compose.read import open_views
    from owlclaw.reports.inspection import projections_status

    config = load_config()
    with open_ledger(config) as (_, led):
        statuses = projections_status(led, open_views(led, config))
    if as_json:
        print_json(statuses)
        return
    out.print(projections_table(statuses))
    parked = [p for s in statuses for p in s.parked]
    if parked:
        out.print("parked events (fix the cause, then `owlclaw projections retry NAME`):")
    for p in parked:
        out.print(
            f"  {p.view} at log position {p.position}: {p.topic} {p.stream_id}@{p.version},"
            f" {p.attempts} attempts, last {p.last_seen:%Y-%m-%d %H:%M:%S}\n"
            f"    {escape(first_line(p.error))}",
            highlight=False,
            soft_wrap=True,
        )


def projections_table(statuses: list[ProjectionStatus]) -> Table:
    table = Table(
        whole("name"),
        *(
            whole(c, right=True)
            for c in ("position", "head", "lag events", "lag seconds", "parked")
        ),
        title="projections",
    )
    for s in statuses:
        table.add_row(
            s.name,
            str(s.position),
            str(s.head),
            str(s.lag_events),
            f"{s.lag_seconds:.3f}",
            str(s.parked_count),
        )
    return table


def _configured_view(config: OwlClawConfig, name: str) -> ConfiguredView:
    """The view called ``name``, or the command fails listing the views there are."""
    from owlclaw.compose.read import configured_views

    views = configured_views(config)
    found = next((v for v in views if v.name == name), None)
    if found is None:
        names = ", ".join(v.name for v in views)
        fail(f"unknown projection {name!r}", f"one of: {names}", EXIT_NOT_FOUND)
    return found


@projections_app.command("retry")
@handles_errors
def projections_retry(
    name: Annotated[str, typer.Argument(help="Projection name (see `projections status`).")],
    as_json: JsonOption = False,
) -> None:
    """Re-apply a projection's parked events in log order, after their cause is fixed.

    A retried event is applied after later events of the log (out of order): the same rows as in
    log order when no later event changed the same run, tool call, memory or schedule;
    `projections rebuild NAME` replays the log in order.
    """
    from projections.runner import retry_parked

    config = load_config()
    configured = _configured_view(config, name)
    with open_ledger(config) as (_, led):
        view = configured.open(led)
        outcomes = retry_parked(led, view)
    if as_json:
        print_json({"name": name, "retried": outcomes})
    elif not outcomes:
        out.print(f"{name}: no parked events")
    else:
        for o in outcomes:
            what = f"{o.topic} at log position {o.position}"
            if o.error is None:
                out.print(f"[green]applied[/] {what}")
            else:
                out.print(
                    f"[red]still fails[/] {what}: {escape(first_line(o.error))}", soft_wrap=True
                )
    if any(o.error is not None for o in outcomes):
        raise typer.Exit(EXIT_FAILED)


@projections_app.command("rebuild")
@handles_errors
def projections_rebuild(
    name: Annotated[str, typer.Argument(help="Projection name (see `projections status`).")],
    as_json: JsonOption = False,
) -> None:
    """Rebuild a projection from position 0 into new tables and switch over atomically."""
    from rich.progress import Progress

    from projections import rebuild

    config = load_config()
    configured = _configured_view(config, name)
    with open_ledger(config) as (_, led), Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"rebuilding {name}", total=None)
        position = rebuild(
            led,
            configured.view,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            **configured.options,
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
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The memories held at this moment, rebuilt from the ledger: an ISO-8601 time"
            " (UTC unless it names an offset) or a log position (@1234).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Bring the memory view up to date, write the agent's MEMORY.md, list or recall memories;
    with --as-of, list or recall the memories of a past moment from the ledger instead."""
    from owlclaw.compose.memory import open_memory_view
    from owlclaw.reports.inspection import memory_of

    if as_of is not None:
        from owlclaw.cli.audit import memory_as_of

        memory_as_of(agent, as_of, recall, limit, as_json=as_json)
        return

    config = load_config()
    with open_ledger(config) as (_, led), err.status("updating the memory view…"):
        reading = memory_of(led, open_memory_view(led, config), config, agent, recall, limit)
    memory_md, archive, behind, result = (
        reading.memory_md,
        reading.archive,
        reading.behind,
        reading.recall,
    )
    if as_json:
        print_json(
            {
                "agent": agent,
                "memory_md": str(memory_md),
                "archive": str(archive),
                "warning": behind,
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
    if behind:
        err.print(f"[yellow]warning:[/] {behind}")
    if result is not None:
        out.print(recall_table(f"{agent} recalls: {recall!r}", result.memories))
        if result.warning:
            err.print(f"[yellow]warning:[/] {result.warning}")
    else:
        out.print(memory_md.read_text(encoding="utf-8"), markup=False, highlight=False)
    out.print(f"[dim]MEMORY.md: {memory_md}\narchive:   {archive}[/]")
