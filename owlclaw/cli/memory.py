"""The memory command: write an agent's MEMORY.md, list or recall its memories (now or as of
a past moment). Its own module: the one reading command that brings up the embedding model."""

from __future__ import annotations

from typing import Annotated

import typer

from owlclaw.cli.common import (
    JsonOption,
    app,
    err,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import recall_table
from owlclaw.config import load_config


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
