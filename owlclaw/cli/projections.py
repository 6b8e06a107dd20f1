"""The projections command group (status, retry, rebuild): operating the read models rather
than reading them, so it is its own module."""

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    JsonOption,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    projections_app,
)
from owlclaw.cli.tables import stacked, whole
from owlclaw.config import OwlClawConfig, load_config

if TYPE_CHECKING:
    from owlclaw.compose.read import ConfiguredView
    from projections.status import ProjectionStatus


def first_line(error: str) -> str:
    """An error's headline (a database error goes on with DETAIL lines; --json has them)."""
    return error.splitlines()[0] if error else error


@projections_app.command("status")
@handles_errors
def projections_status(as_json: JsonOption = False) -> None:
    """Version, position, lag (events and seconds behind the log head), parked events and a
    running rebuild's progress of every projection."""
    from owlclaw.compose.read import open_views
    from owlclaw.reports.inspection import projections_status

    config = load_config()
    with open_ledger(config) as (_, led):
        statuses = projections_status(led, open_views(led, config))
    if as_json:
        print_json(statuses)
        return
    out.print(projections_table(statuses))
    for note in (n for s in statuses for n in version_notes(s)):
        out.print(note, highlight=False, soft_wrap=True)
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


def projections_table(statuses: "list[ProjectionStatus]") -> Table:
    table = Table(
        whole("name"),
        *(whole(c, right=True) for c in ("version", "position", "head", "lag", "parked")),
        title="projections",
    )
    for s in statuses:
        table.add_row(
            s.name,
            version_cell(s),
            str(s.position),
            str(s.head),
            stacked(f"{s.lag_events} ev", f"{s.lag_seconds:.3f} s"),
            str(s.parked_count),
        )
    return table


def version_cell(s: "ProjectionStatus") -> str:
    """The version that built the serving tables, and this code's when it is newer."""
    if s.version is None:
        return "-"
    if s.version < s.code_version:
        return f"{s.version} → {s.code_version}"
    if s.version > s.code_version:
        return f"[red]{s.version}[/]"
    return str(s.version)


def version_notes(s: "ProjectionStatus") -> list[str]:
    """What the table's version column cannot say: a pending upgrade, a newer build, a rebuild
    running and how far it has come (log position reached / head)."""
    notes = []
    if s.version is not None and s.version < s.code_version and s.rebuilding is None:
        notes.append(
            f"{s.name}: version {s.version} built its tables, this code is version"
            f" {s.code_version}: `owlclaw run` rebuilds it"
        )
    if s.version is not None and s.version > s.code_version:
        notes.append(
            f"{s.name}: [red]built by a newer OwlClaw[/] (version {s.version}; this one knows"
            f" {s.code_version}): `owlclaw run` refuses it"
        )
    if s.rebuilding is not None:
        notes.append(
            f"{s.name}: rebuilding, log position {s.rebuilding.position} of"
            f" {s.rebuilding.head} reached"
        )
    return notes


def _configured_view(config: OwlClawConfig, name: str) -> "ConfiguredView":
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
    from projections.retry import retry_parked

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

    from projections.rebuild import rebuild

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
