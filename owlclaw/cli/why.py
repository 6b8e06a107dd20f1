"""The why command: from what an agent recalls for a query back to the run and the model response
that remembered it, with the run's hash chain verified on the way."""

from typing import TYPE_CHECKING, Annotated

import msgspec
import typer
from rich.markup import escape

from owlclaw.cli.common import (
    EXIT_FAILED,
    JsonOption,
    app,
    err,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.config import load_config

if TYPE_CHECKING:
    from owlclaw.audit.why import Trail


@app.command()
@handles_errors
def why(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    query: Annotated[str, typer.Argument(help="What to recall, as the agent's recall would.")],
    limit: Annotated[int, typer.Option(min=1, max=20, help="Memories to recall.")] = 3,
    as_json: JsonOption = False,
) -> None:
    """Recall QUERY for AGENT and walk each memory found back to the run, the step and the model
    response whose `remember` call recorded it, verifying the run's hash chain up to that
    event. Exit 1 when a chain is broken."""
    from owlclaw.audit.why import why as walk_back
    from owlclaw.compose.memory import open_memory_view

    config = load_config()
    with open_ledger(config) as (_, led), err.status("recalling…"):
        found = walk_back(
            led, open_memory_view(led, config, files=False), config, agent, query, limit
        )
    if as_json:
        print_json({"verified": found.verified, **msgspec.to_builtins(found)})
    else:
        if found.warning:
            err.print(f"[yellow]warning:[/] {escape(found.warning)}")
        if not found.trails:
            out.print(f"{escape(agent)} recalls nothing for {escape(query)!r}")
        for trail in found.trails:
            for line in _trail_lines(agent, trail):
                out.print(line, highlight=False, soft_wrap=True)
    if not found.verified:
        raise typer.Exit(EXIT_FAILED)


def _trail_lines(agent: str, t: "Trail") -> list[str]:
    """A memory and the path back to its model response, one step a line."""
    m, r = t.memory, t.response
    chain = (
        f"[green]chain verified[/] ({t.chain.checked} events of the run up to it)"
        if t.chain.verified
        else "[bold red]chain BROKEN[/]: " + escape("; ".join(t.chain.problems))
    )
    step = f"step {t.step}" if t.step else "no model response before it"
    return [
        f"[bold]memory {m.memory_id}[/] (relevance {m.relevance:.3f}): {escape(repr(m.content))}",
        f"  ← run {t.run_no or '?'} (stream {t.run_id})",
        f"  ← {step}"
        + (f", call {escape(t.call_id)}" if t.call_id else "")
        + f": MemoryRemembered at version {t.version}"
        + (f", hash {t.event_hash[:16]}…" if t.event_hash else ""),
        f"  ← model response (version {r.version}, {escape(r.model)}): {escape(r.excerpt)}"
        if r is not None
        else "  ← model response: none recorded",
        f"  {chain}",
        *(
            [f"  [dim]owlclaw explain {escape(agent)} {t.run_no} {t.step}[/]"]
            if t.run_no and t.step
            else []
        ),
    ]
