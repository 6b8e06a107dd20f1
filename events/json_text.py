"""JSON text the ledger can store: PostgreSQL's jsonb cannot hold ``\\u0000``, so an escaped NUL
character becomes U+FFFD, in the stored event (``events.codec``) and in the plaintext sealed
inside it (``events.sealing``), so content reads back the same either way."""

from __future__ import annotations

import re

_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")
"""``\\u0000`` in msgspec's JSON output: an escape preceded by an even run of backslashes (an odd
one makes it literal text ``\\u0000``, which is kept)."""


def without_nul(state: bytes) -> bytes:
    """JSON text with each escaped NUL character replaced by U+FFFD (escaped the same way)."""
    if b"\\u0000" not in state:
        return state
    return _NUL_ESCAPE.sub(rb"\1\\ufffd", state)
