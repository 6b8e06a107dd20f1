"""``owlclaw eval``: regression suites from production runs, and comparing two candidates."""

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

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
)
from owlclaw.cli.tables import text, whole
from owlclaw.config import load_config

if TYPE_CHECKING:
    from owlclaw.audit.evals import EvalComparison, EvalReport

TIMES = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]
"""ISO-8601 forms --since and --until take."""


@app.command("eval")
@handles_errors
def eval_command(
    agent: Annotated[str | None, typer.Argument(help="Agent id.")] = None,
    runs: Annotated[
        str | None, typer.Option(help="Run numbers: 1..50, 7 or 1,4,10..20 (default: all).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="The candidate (a litellm model string).")
    ] = None,
    trigger: Annotated[str | None, typer.Option(help="Only runs with this trigger.")] = None,
    focus: Annotated[
        str | None, typer.Option(help="Only runs whose focus contains this text.")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            formats=TIMES, help="Only runs queued at or after this time (UTC without a zone)."
        ),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(formats=TIMES, help="Only runs queued before this time (UTC without a zone)."),
    ] = None,
    app_dir: Annotated[
        Path | None,
        typer.Option(
            "--app", help="The agent's app directory (default: the one it was served from)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=32, help="Runs re-decided at once.")] = 4,
    max_divergence: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 1 when the fraction of runs not decided identically exceeds this.",
        ),
    ] = 1.0,
    compare: Annotated[
        tuple[str, str] | None,
        typer.Option(help="Compare two recorded evals (EVAL_A EVAL_B) instead of running one."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Re-ask a candidate model at the decision points of many recorded runs (no tool runs),
    summarise how its decisions differ, and record the results as an eval stream."""
    from owlclaw.audit.evals import SelectorError, UnknownEval, as_utc

    try:
        if compare is not None:
            _compare(*compare, as_json=as_json)
            return
        if agent is None or model is None:
            fail("eval needs AGENT and --model", "owlclaw eval AGENT --model M", EXIT_USAGE)
        _evaluate(
            agent,
            model,
            app_dir,
            concurrency,
            max_divergence,
            as_json,
            runs=runs,
            trigger=trigger,
            focus=focus,
            since=as_utc(since),
            until=as_utc(until),
        )
    except SelectorError as e:
        fail(str(e), "--runs takes N, N..M or a comma-separated list of them", EXIT_USAGE)
    except UnknownEval as e:
        fail(str(e), "an eval prints its id when it finishes", EXIT_NOT_FOUND)


def _evaluate(
    agent: str,
    model: str,
    app_dir: Path | None,
    concurrency: int,
    max_divergence: float,
    as_json: bool,
    **selection: object,
) -> None:
    import asyncio

    from owlclaw.audit.decision_points import AgentRecord
    from owlclaw.audit.evals import RunSelector, evaluate
    from owlclaw.llm.providers import litellm_with_offline_providers

    selector = RunSelector(**selection)  # type: ignore[arg-type]
    selector.numbers()  # a bad range is refused before anything is recorded
    config = load_config()
    with open_ledger(config) as (_, led):
        record = AgentRecord.open(led, agent, config, app_dir)
        litellm = litellm_with_offline_providers()
        with Progress(
            TextColumn("re-deciding runs"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("eval", total=None)
            report = asyncio.run(
                evaluate(
                    litellm,
                    record,
                    model,
                    selector,
                    concurrency=concurrency,
                    app_dir=str(record.app.root) if record.app is not None else "",
                    progress=lambda done, total: bar.update(task, completed=done, total=total),
                )
            )
    summary = report.as_dict()
    if as_json:
        print_json(summary)
    else:
        out.print(eval_table(report))
        for d in summary["diverging"]:
            out.print(
                f"run {d['run_no']}: {d['outcome']} at step {d['step']}: recorded"
                f" {escape(d['recorded'])} / candidate {escape(d['candidate'])}",
                highlight=False,
                soft_wrap=True,
            )
        if report.skipped:
            out.print(f"skipped (no decision point): {report.skipped}")
        out.print(f"compare later with: owlclaw eval --compare {report.eval_id} OTHER_EVAL")
    if report.divergent_fraction > max_divergence:
        err.print(
            f"[red]divergence {report.divergent_fraction:.1%} exceeds --max-divergence"
            f" {max_divergence:.1%}[/]"
        )
        raise typer.Exit(EXIT_FAILED)


def _compare(eval_a: str, eval_b: str, *, as_json: bool) -> None:
    from owlclaw.audit.evals import EvalComparison, load_eval

    with open_ledger() as (_, led):
        comparison = EvalComparison.of(load_eval(led, eval_a), load_eval(led, eval_b))
    if as_json:
        print_json(comparison.as_dict())
        return
    out.print(comparison_table(comparison))
    for c in comparison.changed:
        out.print(f"run {c['run_no']}: {c['a']} -> {c['b']}")


def eval_table(report: "EvalReport") -> Table:
    """The runs by outcome; the token and cost differences under the table."""
    summary = report.as_dict()
    table = Table(
        *(whole(column, right=True) for column in ("runs", *report.counts, "divergent")),
        title=f"eval {report.eval_id}: {report.agent_id} re-decided by {report.model}",
        caption=f"tokens Δ {summary['tokens_delta']:+d},"
        f" cost Δ {summary['cost_delta_usd']:+.6f} USD",
    )
    table.add_row(
        str(summary["runs"]),
        *(str(n) for n in report.counts.values()),
        f"{report.divergent_fraction:.1%}",
    )
    return table


def comparison_table(comparison: "EvalComparison") -> Table:
    """The two evals side by side, a row per figure (their models can be long)."""
    a, b = comparison.a, comparison.b
    table = Table(
        whole(""),
        text(a.eval_id),
        text(b.eval_id),
        title=f"eval {a.eval_id} vs {b.eval_id}",
    )
    table.add_row("model", escape(a.model), escape(b.model))
    table.add_row("runs", str(len(a.runs)), str(len(b.runs)))
    for outcome in ("identical", "different", "new_tool", "refused"):
        table.add_row(outcome, str(a.counts[outcome]), str(b.counts[outcome]))
    return table
