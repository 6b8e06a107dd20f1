"""The memory command: write an agent's MEMORY.md, list or recall its memories (now or as of
a past moment). Its own module: the one reading command that brings up the embedding model."""

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

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
from owlclaw.cli.tables import archived_table, recall_table
from owlclaw.config import load_config

if TYPE_CHECKING:
    from projections.memory import ArchivedMemory


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
    archived: Annotated[
        bool,
        typer.Option(
            "--archived",
            help="List the archived memories instead: when each was last recalled, archived"
            " and will be deleted ([memory] delete_after_days).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Bring the memory view up to date, write the agent's MEMORY.md, list or recall memories
    (--archived: the archived ones); with --as-of, list or recall the memories of a past moment
    from the ledger instead."""
    if archived and (as_of is not None or recall is not None):
        raise typer.BadParameter(
            "--archived lists the archived memories as they are now: it takes no --as-of or"
            " --recall"
        )
    if as_of is not None:
        from owlclaw.cli.audit import memory_as_of

        memory_as_of(agent, as_of, recall, limit, as_json=as_json)
        return

    config = load_config()
    if not archived:
        served = ask_server(config, lambda client: client.memory(agent, recall, limit))
        if served is not None:
            _print_reading(served, as_json)
            return
    from owlclaw.compose.memory import open_memory_view
    from owlclaw.reports.inspection import memory_of

    with open_ledger(config) as (_, led), err.status("updating the memory view…"):
        view = open_memory_view(led, config)
        reading = memory_of(led, view, config, agent, recall, limit)
        if archived:
            kept = view.archived_memories(agent)
    if archived:
        _print_archived(agent, kept, config.memory.delete_after_days, reading.behind, as_json)
        return
    _print_reading(reading.as_json(agent, recall), as_json)


def _print_reading(data: dict[str, Any], as_json: bool) -> None:
    """An agent's memory as read here or by the server (``MemoryReading.as_json``)."""
    if as_json:
        print_json(data)
        return
    if data["warning"]:
        err.print(f"[yellow]warning:[/] {data['warning']}")
    result = data["recall"]
    if result is not None:
        from projections.relevance import Memory

        memories = msgspec.convert(result["memories"], list[Memory])
        out.print(recall_table(f"{data['agent']} recalls: {result['query']!r}", memories))
        if result["warning"]:
            err.print(f"[yellow]warning:[/] {result['warning']}")
    else:
        text = Path(data["memory_md"]).read_text(encoding="utf-8")
        out.print(text, markup=False, highlight=False)
    out.print(f"[dim]MEMORY.md: {data['memory_md']}\narchive:   {data['archive']}[/]")


def _print_archived(
    agent: str,
    memories: "list[ArchivedMemory]",
    delete_after_days: int,
    behind: str | None,
    as_json: bool,
) -> None:
    def deletes_on(m: "ArchivedMemory") -> datetime | None:
        if not delete_after_days or m.archived_at is None:
            return None
        return m.archived_at + timedelta(days=delete_after_days)

    if as_json:
        print_json(
            {
                "agent": agent,
                "warning": behind,
                "archived": [
                    {
                        "memory_id": str(m.memory_id),
                        "content": m.content,
                        "tags": m.tags,
                        "created_at": m.created_at.isoformat(),
                        "last_recalled": m.last_recalled.isoformat() if m.last_recalled else None,
                        "archived_at": m.archived_at.isoformat() if m.archived_at else None,
                        "reason": m.reason,
                        "deletes_at": d.isoformat() if (d := deletes_on(m)) else None,
                    }
                    for m in memories
                ],
            }
        )
        return
    if behind:
        err.print(f"[yellow]warning:[/] {behind}")
    if not memories:
        out.print(f"{agent} has no archived memories")
        return
    out.print(archived_table(f"{agent}: {len(memories)} archived memories", memories, deletes_on))
