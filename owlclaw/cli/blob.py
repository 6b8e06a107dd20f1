"""``owlclaw blob``: the bytes of a blob the ledger refers to by sha256 (an MCP tool's image),
checked against that sha256 as they are read. Its own module: the one command that writes raw
bytes instead of text."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    app,
    fail,
    handles_errors,
    open_ledger,
    out,
)


@app.command()
@handles_errors
def blob(
    sha256: Annotated[str, typer.Argument(help="The sha256 a recorded result gives.")],
    to: Annotated[
        Path | None, typer.Option("--out", help="Write the bytes to this file, not stdout.")
    ] = None,
) -> None:
    """Write a stored blob's bytes to stdout or --out FILE (refused when they no longer hash
    to SHA256)."""
    from events.errors import BlobCorrupted, UnknownBlob

    if to is None and sys.stdout.isatty():
        fail("a blob is raw bytes, not for a terminal", "add --out FILE or redirect", EXIT_USAGE)
    try:
        with open_ledger() as (_, led):
            media_type, data = led.blobs.get(sha256)
    except UnknownBlob as e:
        hint = "a stored blob's sha256 is in its tool call's result (`owlclaw ledger AGENT`)"
        fail(str(e), hint, EXIT_NOT_FOUND)
    except BlobCorrupted as e:
        fail(str(e), "the blob was altered in the database: do not trust it", EXIT_FAILED)
    if to is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    to.write_bytes(data)
    out.print(f"wrote {len(data)} bytes ({media_type}) to {to}", highlight=False)
