"""Re-running what was recorded: replay (step by step, --verify re-executes it, --model
re-decides it with another model). Its own module: it loads the app and the models, which no
other reading command does."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from events.catalog import event_fields
from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOption,
    app,
    ask_server,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    summary,
)
from owlclaw.cli.tables import text, whole
from owlclaw.config import OwlClawConfig, load_config

if TYPE_CHECKING:
    from events import Ledger
    from owlclaw.audit.redecide import ReDecision


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
    config = load_config()
    with open_ledger(config) as (_, led):
        state = led.load_agent(agent).state
        if run_no > state.run_count:
            fail(f"agent {agent} has no run {run_no}", f"`owlclaw ledger {agent}`", EXIT_NOT_FOUND)
        events = led.stream(run_stream_id(agent, run_no))
        report = None
        if verify:
            report = _verified(led, config, agent, run_no, app_dir)
    if as_json:
        print_json(
            {
                "steps": [
                    {"type": type(e).__name__, "version": e.originator_version, **event_fields(e)}
                    for e in events
                ],
                "verify": report,
            }
        )
    else:
        for e in events:
            line = summary(event_fields(e))
            out.print(f"{e.originator_version:>4} {type(e).__name__:<22} {escape(line)}")
        if report is not None and report["matched"]:
            out.print(f"[green]replay matches[/]: {report['compared']} steps reproduced")
        elif report is not None:
            _print_differences(report)
    if report is not None and not report["matched"]:
        raise typer.Exit(EXIT_FAILED)


def _verified(
    led: "Ledger", config: OwlClawConfig, agent: str, run_no: int, app_dir: Path | None
) -> dict[str, Any]:
    """The run's ``ReplayReport`` as JSON: verified by the running ``owlclaw run`` (the runtime
    imported there already), or in this process when none listens; with ``--app``, always
    here (the server is not handed directories to load code from)."""
    if app_dir is None:
        served = ask_server(config, lambda client: client.verify(agent, run_no))
        if served is not None:
            return served
    from owlclaw.audit.verify import verify_run

    report: dict[str, Any] = msgspec.to_builtins(
        verify_run(led, agent, run_no, app_dir, config.runtime)
    )
    return report


def _print_differences(data: dict[str, Any]) -> None:
    """Each difference as its two sides, numbered as the listing numbers the recorded step."""
    from owlclaw.audit.verify import ReplayReport

    report = msgspec.convert(data, ReplayReport)
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

        async def redecided() -> "ReDecision":
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


def redecision_table(report: "ReDecision") -> Table:
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
