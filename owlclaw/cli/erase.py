"""The erase command: an operator erases a memory, a run or a whole agent (GDPR), by recording
who, why and what (DataErased) and destroying the data keys its content was sealed under.
The ledger's chains still verify; the content reads ``[erased]`` everywhere from then on."""

import getpass
from typing import Annotated

import typer
from rich.markup import escape

from events.catalog import ErasureKind
from owlclaw.cli.common import (
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
from owlclaw.config import load_config


@app.command()
@handles_errors
def erase(
    reason: Annotated[str, typer.Option(help="Why it is erased (recorded in the ledger).")],
    memory: Annotated[str | None, typer.Option(help="A memory id.")] = None,
    run: Annotated[str | None, typer.Option(help="A run id (its stream id).")] = None,
    agent: Annotated[str | None, typer.Option(help="An agent id: all its content.")] = None,
    by: Annotated[str | None, typer.Option(help="Who erases it (default: the OS user).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Erase the content of one memory, one run (focus, payload, model messages, tool
    arguments and results, answer) or one agent (all of that for each of its runs and
    memories): the erasure is recorded, then the data keys are destroyed. The agent's memory
    view and MEMORY.md are brought up to date without it. Not undoable."""
    from events.erasure import erase as erase_content
    from owlclaw.compose.memory import open_memory_view
    from owlclaw.reports.inspection import memory_of

    options: list[tuple[ErasureKind, str | None]] = [
        ("memory", memory),
        ("run", run),
        ("agent", agent),
    ]
    named = [(kind, value) for kind, value in options if value is not None]
    if len(named) != 1:
        fail(
            "name exactly one of --memory, --run, --agent", "see `owlclaw erase --help`", EXIT_USAGE
        )
    if not reason.strip():
        fail("--reason is empty", "say why it is erased: it is recorded", EXIT_USAGE)
    ((kind, target),) = named
    config = load_config()
    with open_ledger(config) as (_, led), err.status(f"erasing {kind} {target}…"):
        agent_id, erased = erase_content(led, kind, target, reason, by or getpass.getuser())
        if erased.memory_ids:
            memory_of(led, open_memory_view(led, config), config, agent_id, None)
    if as_json:
        print_json(
            {
                "kind": kind,
                "target": target,
                "agent": agent_id,
                "keys": [str(k) for k in erased.keys],
                "memory_ids": [str(m) for m in erased.memory_ids],
                "reason": erased.reason,
                "by": erased.by,
                "version": erased.originator_version,
            }
        )
        return
    out.print(
        f"erased {kind} {escape(target)} of agent {escape(agent_id)}: "
        f"{len(erased.keys)} key(s) destroyed, {len(erased.memory_ids)} memory(ies) removed; "
        f"recorded as DataErased at version {erased.originator_version} of its stream",
        highlight=False,
    )
