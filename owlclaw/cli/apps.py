"""Making and serving agent apps: init (scaffold one) and run (validate and serve them until
Ctrl-C). Their own module: they are the commands that create and start agents."""

import signal
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from owlclaw.cli.common import (
    EXIT_CONFIG,
    EXIT_USAGE,
    JsonOption,
    app,
    command_name,
    err,
    exit_served,
    fail,
    handles_errors,
    out,
    print_json,
)
from owlclaw.config import OwlClawConfig, load_config


@app.command()
@handles_errors
def init(
    path: Annotated[Path, typer.Argument(help="Directory to create the agent app in.")],
    agent_id: Annotated[
        str | None, typer.Option("--id", help="Agent id (default: the directory name).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Scaffold an agent app: SOUL.md, IDENTITY.md, a skill, owlclaw.toml, handlers.py (a
    capability and a state provider) and an offline script for the scripted model."""
    from owlclaw.cli.scaffold import scaffold

    made = scaffold(path, agent_id)
    files = sorted(str(p.relative_to(made.root)) for p in made.root.rglob("*") if p.is_file())
    if as_json:
        print_json({"agent_id": made.agent_id, "app_dir": str(made.root), "files": files})
        return
    out.print(f"[green]created[/] agent [bold]{made.agent_id}[/] in {made.root}")
    for name in files:
        out.print(f"  {name}")
    owlclaw = command_name()
    out.print(
        f"\nnext:\n  {owlclaw} run {path}\n"
        f"  {owlclaw} trigger {made.agent_id} --focus 'check the ticket queue'",
        soft_wrap=True,
    )


@app.command()
@handles_errors
def run(
    apps: Annotated[list[Path], typer.Argument(help="Agent app directories to serve.")],
    placement: Annotated[
        str | None, typer.Option(help="local | shared | dedicated (default: configuration).")
    ] = None,
) -> None:
    """Serve agent apps: database, projections, timer service, agents (Ray actors) and the
    webhook endpoint, until Ctrl-C. Each app is validated first (files, [governance],
    handlers.py): an invalid one is refused with exit code 5 before anything starts."""
    import asyncio

    from owlclaw.app import AppError
    from owlclaw.server.service import Service
    from owlclaw.server.validation import InvalidApps, validate_apps

    config = _with_placement(load_config(), placement)
    try:
        # before anything starts
        loaded = validate_apps(apps, config.runtime.app_load_timeout_s, config.runtime)
    except InvalidApps as e:
        for problem in e.problems[:-1]:
            err.print(f"[bold red]error:[/] {escape(problem)}", highlight=False, soft_wrap=True)
        fail(e.problems[-1], "fix each app named above", EXIT_CONFIG)
    ids = [a.agent_id for a in loaded]
    if len(set(ids)) != len(ids):
        raise AppError(f"two apps have the same agent id: {', '.join(sorted(ids))}")
    _check_tenants(config, ids)
    asyncio.run(_serve(Service(config, loaded, progress=_starting), config))
    exit_served()


def _check_tenants(config: OwlClawConfig, agent_ids: list[str]) -> None:
    """Refuse an agent in two tenants; warn of a tenant that matches no served agent."""
    from owlclaw.tenants import TenantConflict, Tenants

    try:
        warnings = Tenants(config.tenants).check_served(agent_ids)
    except TenantConflict as e:
        fail(str(e), "make the [tenants] globs of owlclaw.toml disjoint", EXIT_CONFIG)
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


def _with_placement(config: OwlClawConfig, placement: str | None) -> OwlClawConfig:
    if placement is None:
        return config
    runtime = msgspec.to_builtins(config.runtime) | {"placement": placement}
    try:
        return msgspec.structs.replace(
            config, runtime=msgspec.convert(runtime, type(config.runtime))
        )
    except msgspec.ValidationError as e:
        fail(f"--placement: {e}", "one of local, shared, dedicated", EXIT_USAGE)
        raise


def _starting(part: str) -> None:
    err.print(f"[dim]starting {part}…[/]")


async def _serve(service: Any, config: OwlClawConfig) -> None:
    import asyncio

    from owlclaw.server.webhook import serving

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serving(service, config):
        url = f"http://{config.server.host}:{config.server.port}"
        out.print(
            f"[green]serving[/] {', '.join(service.apps)} at {url} "
            f"(placement {config.runtime.placement}, timers {service.timer_backend}); "
            "Ctrl-C stops",
            highlight=False,
        )
        await stop.wait()
        err.print("[dim]stopping…[/]")
