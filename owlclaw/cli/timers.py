"""The timer service processes."""

from typing import Annotated

import typer

from owlclaw.cli.common import (
    err,
    exit_served,
    handles_errors,
    open_ledger,
    timers_app,
)
from owlclaw.config import load_config


@timers_app.command("serve")
@handles_errors
def timers_serve() -> None:
    """Register schedules with the configured backend and fire built-in timers (until Ctrl-C)."""
    from owlclaw.server.timers import serve

    config = load_config()
    with open_ledger(config) as (_, led):
        err.print(f"timer service: backend {config.timers.backend}; Ctrl-C stops")
        serve(led, config)
    exit_served()


@timers_app.command("hatchet-worker")
@handles_errors
def timers_hatchet_worker(
    via_server: Annotated[
        bool,
        typer.Option(
            "--via-server",
            help="deliver to the `owlclaw run` server that hosts the agents (local placement)",
        ),
    ] = False,
    agent: Annotated[
        list[str] | None,
        typer.Option(help="deliver only this agent's fires (repeat it; default: every agent's)"),
    ] = None,
) -> None:
    """Receive Hatchet's timer fires and deliver them to the agents (HATCHET_CLIENT_* env);
    with --agent, the other agents' fires go back to the built-in timers of their server."""
    from owlclaw.server.timers import hatchet_worker

    config = load_config()
    try:
        with open_ledger(config) as (_, led):
            hatchet_worker(led, config, via_server=via_server, served=agent)
    except SystemExit as stopped:  # how Hatchet's worker ends once it has stopped on a signal
        exit_served(int(stopped.code or 0))
