"""``owlclaw archive``: move ended runs out of the ledger table into sealed archive files.
Its own module: the one command that deletes rows from the ledger (each accounted for by an
ArchiveSealed first)."""

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated

import msgspec
import typer
from rich.markup import escape

from owlclaw.cli.common import (
    EXIT_USAGE,
    JsonOption,
    app,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.config import load_config


def parse_before(text: str) -> datetime:
    """``--before``: an ISO date (midnight UTC) or date and time (UTC unless it names an
    offset)."""
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--before {text!r} is not a date", "e.g. --before 2026-01-01", EXIT_USAGE)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@app.command()
@handles_errors
def archive(
    before: Annotated[
        str,
        typer.Option(
            "--before", help="Archive runs that ended before this date (UTC), e.g. 2026-01-01."
        ),
    ],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent (default: every agent).")
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir", help="The archive directory (default: [ledger] archive_dir of the config)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Move ended runs out of the ledger table into compressed archive files, one per agent and
    month they ended in: each file is written and fsynced, then sealed on its agent's stream
    (ArchiveSealed: its sha256 and every run's head), then the runs' rows are deleted. Reads,
    replay and verify find archived runs there. Running it again finishes an interrupted one."""
    from projections import VIEWS
    from projections.absorbed import absorbed

    moment = parse_before(before)
    config = load_config()
    if directory is not None:
        ledger_config = msgspec.structs.replace(
            config.ledger, archive_dir=str(directory.expanduser().resolve())
        )
        config = msgspec.structs.replace(config, ledger=ledger_config)
    results = []
    with open_ledger(config) as (_, led):
        agents = led.agent_ids() if agent is None else [agent]
        if agent is not None:
            led.require_agent(agent)
        caught = absorbed(led, VIEWS)
        for agent_id in agents:
            try:
                results.append(led.archive.archive_agent(agent_id, moment, caught.position))
            except OSError as e:
                fail(
                    f"cannot write the archive of {agent_id} under {config.archive_path}: {e}",
                    "pass a writable --dir, or set [ledger] archive_dir",
                    EXIT_USAGE,
                )
    if as_json:
        print_json(
            {
                "before": moment,
                "directory": str(config.archive_path),
                "views_absorbed": caught,
                "agents": results,
            }
        )
        return
    for r in results:
        if r.files or r.finished:
            finished = f"; finished {r.finished} run(s) sealed earlier" if r.finished else ""
            out.print(
                f"{escape(r.agent_id)}: {r.runs} run(s), {r.events} events archived into "
                f"{', '.join(r.files) or 'no new file'}{finished}",
                highlight=False,
            )
    runs = sum(r.runs for r in results)
    out.print(
        f"archived {runs} run(s) of {len(results)} agent(s) that ended before "
        f"{moment.isoformat()} into {config.archive_path}",
        highlight=False,
    )
    if held := sum(r.held for r in results):
        out.print(
            f"held back {held} run(s): they have events after log position "
            f"{caught.position}, which the {caught.view} view has not absorbed yet; the next "
            "archiving moves them once every view has (`owlclaw run` keeps the views current)",
            highlight=False,
        )
