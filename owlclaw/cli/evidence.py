"""Portable evidence: ``keys init``, ``export`` (a signed bundle of an agent's streams)."""

import sys
from typing import Annotated

import typer
from rich.markup import escape

from owlclaw.cli.common import (
    EXIT_CONFIG,
    EXIT_NOT_FOUND,
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

keys_app = typer.Typer(no_args_is_help=True, help="The key that signs evidence bundles.")
app.add_typer(keys_app, name="keys")

KEY_HINT = "create one with `owlclaw keys init`, or set evidence.signing_key / OWLCLAW_SIGNING_KEY"


@keys_app.command("init")
@handles_errors
def keys_init(
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an existing key (old bundles stay signed by it)."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Create the Ed25519 key pair that signs `owlclaw export` bundles; print its public key
    (base64 of the raw 32-byte key), which `owlclaw verify --bundle --pubkey` takes."""
    from owlclaw.audit.evidence.keys import SigningKeyError, init_key, public_key_path

    path = load_config().signing_key_path
    try:
        public = init_key(path, force=force)
    except SigningKeyError as e:
        fail(str(e), "keep it, or replace it with --force", EXIT_CONFIG)
    if as_json:
        print_json(
            {
                "private_key_path": str(path),
                "public_key_path": str(public_key_path(path)),
                "public_key": public.base64,
                "public_key_encoding": "base64 of the raw 32-byte Ed25519 public key",
                "key_id": public.key_id,
            }
        )
        return
    out.print(f"private key: {escape(str(path))} (mode 0600)", highlight=False, soft_wrap=True)
    out.print(
        f"public key (base64 of the raw 32-byte Ed25519 key, also in"
        f" {escape(str(public_key_path(path)))}):",
        highlight=False,
        soft_wrap=True,
    )
    out.print(public.base64, highlight=False, soft_wrap=True)
    out.print(f"key id: {public.key_id}", highlight=False)


@app.command()
@handles_errors
def export(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    runs: Annotated[
        list[str] | None, typer.Option("--runs", help="A range of run numbers, N..M (repeatable).")
    ] = None,
    run: Annotated[
        list[str] | None, typer.Option("--run", help="A run number or run id (repeatable).")
    ] = None,
) -> None:
    """Write a signed evidence bundle (JSON lines) of the agent's stream and its runs' streams
    (all of them, or those selected) to stdout, for `owlclaw verify --bundle`."""
    from owlclaw.audit.evidence.export import RunSelectionError, export_bundle, select_runs
    from owlclaw.audit.evidence.keys import SigningKeyError, load_key

    config = load_config()
    try:
        key = load_key(config.signing_key_path)
    except SigningKeyError as e:
        fail(str(e), KEY_HINT, EXIT_CONFIG)
    with open_ledger(config) as (_, led):
        run_count = led.load_agent(agent).state.run_count
        try:
            numbers = select_runs(agent, run_count, runs or [], run or [])
        except RunSelectionError as e:
            fail(str(e), f"`owlclaw ledger {agent}` lists its runs", EXIT_NOT_FOUND)
        lines = 0
        for line in export_bundle(led, agent, numbers, key):
            sys.stdout.buffer.write(line)
            lines += 1
        sys.stdout.buffer.flush()
    err.print(f"exported {lines - 2} events of {agent} ({len(numbers)} runs)", highlight=False)
