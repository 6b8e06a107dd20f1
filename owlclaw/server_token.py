"""The token that guards the server's endpoints: configured, or kept in the data directory.

Its own module so that clients (the CLI) read it without importing the server."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from owlclaw.config import OwlClawConfig

TOKEN_FILE = "server.token"


def server_token(config: OwlClawConfig, *, create: bool = False) -> str | None:
    """The configured token, else the one in ``<data_dir>/server.token`` (made if ``create``)."""
    if config.server.token:
        return config.server.token
    path = config.data_path / TOKEN_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    if not create:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    # written whole under another name, then renamed: a CLI reading it meanwhile finds either
    # no file or the whole token, never an empty one
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{TOKEN_FILE}.")  # mode 0600
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token)
    Path(partial).replace(path)
    return token
