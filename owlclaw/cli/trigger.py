"""The trigger command: start a run of a served agent through the server, then follow its
events in the ledger to its end. Its own module: the one command that both asks the server and
waits on the log."""

import json
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from events import catalog as ev
from events.catalog import event_fields
from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    JsonOption,
    app,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    server_client,
)
from owlclaw.config import load_config
from owlclaw.reports.narrate import step_text

if TYPE_CHECKING:
    from events import Ledger

ENDED_WELL = ("completed", "skipped", "parked")
WAIT_READY_S = 60.0
"""How long ``owlclaw trigger`` waits for a server that is still starting (Ray, the embedding
model and Hatchet take tens of seconds on a small machine)."""


def _payload(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        fail(f"--payload is not valid JSON: {e}", "e.g. --payload '{\"price\": 101.5}'", EXIT_USAGE)
    if not isinstance(data, dict):
        fail("--payload must be a JSON object", "e.g. --payload '{\"price\": 101.5}'", EXIT_USAGE)
    return data


@app.command()
@handles_errors
def trigger(
    agent: Annotated[str, typer.Argument(help="Agent id (served by `owlclaw run`).")],
    focus: Annotated[str | None, typer.Option(help="What this run should focus on.")] = None,
    payload: Annotated[str | None, typer.Option(help="A JSON object given to the run.")] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Return once the run is accepted.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the run to end.")] = 600,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="Key that makes a retried trigger return the same run (default: a new one)."
        ),
    ] = None,
    wait_ready: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds to wait for the server to be ready (just started: `owlclaw run &`).",
        ),
    ] = WAIT_READY_S,
    as_json: JsonOption = False,
) -> None:
    """Start a run of a served agent; wait for it and show its steps (exit 1 if it failed)."""

    data = _payload(payload)
    config = load_config()
    with server_client(config) as client:
        waiting = f"waiting up to {wait_ready:g} s for the server at {client.url} to be ready…"
        client.wait_ready(
            wait_ready, waiting=lambda: err.print(f"[dim]{waiting}[/]", highlight=False)
        )
        accepted = client.submit(
            agent, focus, data, idempotency_key=idempotency_key or uuid.uuid4().hex
        )
    run_id = accepted["run_id"]
    if no_wait:
        if as_json:
            print_json(accepted)
        else:
            out.print(f"accepted run {run_id} of {agent}")
        return
    with open_ledger(config) as (_, led):
        events = _follow(led, run_id, timeout, show=not as_json)
        warning = led.load_agent(agent).state.app_warning  # as the run found its app
    if warning is not None:
        err.print(
            f"[yellow]warning:[/] {agent} runs its previous code: {escape(warning)}",
            highlight=False,
            soft_wrap=True,
        )
    status = _parked_status(events) or type(events[-1]).__name__.removeprefix("Run").lower()
    if as_json:
        print_json(
            {
                "agent_id": agent,
                "run_id": run_id,
                "status": status,
                "app_warning": warning,
                "steps": [{"type": type(e).__name__, **event_fields(e)} for e in events],
            }
        )
    if status not in ENDED_WELL:
        raise typer.Exit(EXIT_FAILED)


def _parked_status(events: list[ev.LedgerEvent]) -> str | None:
    """ "parked" when the run waits for an approval (the command says which) or for its
    sub-agents, else None."""
    if not events or not isinstance(events[-1], ev.RunParked):
        return None
    if events[-1].spawn_id:
        err.print("[yellow]parked:[/] waiting for its sub-agents (`owlclaw ledger` shows them)")
        return "parked"
    if events[-1].message_id:
        err.print(
            "[yellow]parked:[/] waiting for another agent's reply "
            "(`owlclaw ledger AGENT --conversation` shows it)"
        )
        return "parked"
    approval_id, call_id = events[-1].approval_id, events[-1].call_id
    asks = any(
        isinstance(e, ev.ToolCallRequested) and e.call_id == call_id and e.tool == "ask_human"
        for e in events
    )
    waits_for = (
        f"a person's answer to question {approval_id} (`owlclaw answer {approval_id} TEXT`)"
        if asks
        else f"approval {approval_id} "
        f"(`owlclaw approve {approval_id}` or `owlclaw deny {approval_id}`)"
    )
    err.print(f"[yellow]parked:[/] waiting for {waits_for}", highlight=False)
    return "parked"


def _follow(led: "Ledger", run_id: str, timeout: float, *, show: bool) -> list[ev.LedgerEvent]:
    """The run's events as they are committed, printed as they come, until its end event."""
    import asyncio

    from projections.feed import afollow_run

    async def follow() -> list[ev.LedgerEvent]:
        events = []
        async for event in afollow_run(
            led, run_id, poll_s=0.1, timeout_s=timeout, until_parked=True
        ):
            events.append(event)
            if show and (text := step_text(event)):
                out.print(text, highlight=False, markup=False, soft_wrap=True)
        return events

    try:
        return asyncio.run(follow())
    except TimeoutError as e:
        fail(str(e), "see `owlclaw status`", EXIT_FAILED)
