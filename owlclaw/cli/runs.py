"""The runs command: an agent's latest runs from the runs view, with each run's plan progress.
Its own module: it reads the runs view and nothing else."""

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer
from rich.table import Table
from rich.text import Text

from owlclaw.cli.common import (
    EXIT_NOT_FOUND,
    JsonOption,
    app,
    ask_server,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import OwlClawConfig, load_config

if TYPE_CHECKING:
    from owlclaw.reports.listings import Runs
    from projections.run_row import RunRow


@app.command()
@handles_errors
def runs(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs to show.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """An agent's latest runs, newest first: status, trigger, start and end, steps, tool calls,
    cost, and its plan's progress (update_plan)."""
    config = load_config()
    listing = ask_server(config, lambda client: client.runs(agent, limit))
    if listing is None:
        listing = _runs_here(config, agent, limit)
    if listing.behind:
        err.print(f"[yellow]warning:[/] {listing.behind}")
    if as_json:
        print_json([{**msgspec.to_builtins(r), "plan": plan_progress(r)} for r in listing.rows])
        return
    out.print(runs_table(agent, listing.rows))


def _runs_here(config: OwlClawConfig, agent: str, limit: int) -> "Runs":
    """The listing read in this process, without a server."""
    from events.errors import UnknownAgent
    from owlclaw.reports.inspection import open_runs, runs_of, with_known_agents

    with open_ledger(config) as (_, led):
        try:
            return runs_of(led, open_runs(led), agent, limit)
        except UnknownAgent as e:
            hint = "`owlclaw status` lists them"
            fail(with_known_agents(led, e), hint, EXIT_NOT_FOUND)


def plan_progress(row: "RunRow") -> str | None:
    """``2/5 done``; None without a plan."""
    if row.plan_items is None:
        return None
    return f"{row.plan_done}/{row.plan_items} done"


def runs_table(agent: str, rows: "list[RunRow]") -> Table:
    """A run's trigger under its number, its plan's progress under its status, its end under
    its start (UTC, to the minute), its tool calls under its steps, its error under its focus."""
    table = Table(
        whole("run"),
        whole("status\nplan"),
        whole("started\nended"),
        whole("steps\ntools", right=True),
        whole("cost", right=True),
        text("focus"),
        title=f"runs of {agent}",
    )
    for r in rows:
        table.add_row(
            stacked(str(r.run_no), Text(r.trigger, "dim")),
            stacked(r.status, plan_progress(r) or "-"),
            stacked(_minute(r.started_at), _minute(r.ended_at) if r.ended_at else None),
            stacked(str(r.iterations), str(r.tool_calls)),
            f"${r.cost_usd:.4f}",
            stacked(r.focus or "", Text(r.error, "red") if r.error else None),
        )
    return table


def _minute(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%m-%d %H:%M}"
