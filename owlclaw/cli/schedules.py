"""The schedules command: every schedule with its next fire, backend and last outcome. Its own
module: it reads the schedules view and nothing else."""

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from owlclaw.cli.common import (
    JsonOption,
    app,
    ask_server,
    err,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import load_config
from owlclaw.reports.relative_time import relative


@app.command()
@handles_errors
def schedules(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every agent).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Include ended schedules.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Schedules with their next fire time, on_missed policy, backend and last outcome."""
    config = load_config()
    listing = ask_server(config, lambda client: client.schedules(agent, every))
    if listing is None:
        from owlclaw.reports.inspection import open_schedules, schedules_of

        with open_ledger(config) as (_, led):
            listing = schedules_of(led, open_schedules(led), agent, every)
    if listing.behind:
        err.print(f"[yellow]warning:[/] {listing.behind}")
    if as_json:
        print_json(listing.rows)
        return
    out.print(schedules_table(agent, listing.rows))


def schedules_table(agent: str | None, rows: list[dict[str, Any]]) -> Table:
    """A schedule's agent under its id (unless ``agent`` names it), its next fire and on_missed
    policy under its cron, its backend and missed fires under its status, its last outcome
    under its focus."""
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
            stacked(
                r["cron"] or r["kind"],
                f"next {relative(next_fire)}" if next_fire else None,
                Text(f"on missed: {r['on_missed']}", "dim"),
            ),
            stacked(r["status"], r["backend"], f"{misses} missed" if misses else None),
            stacked(r["focus"], Text(f"last: {last}", "dim") if last else None),
        )
    return table
