"""Values for view columns: PostgreSQL text and jsonb cannot hold NUL, which events stored
before the codec replaced it with U+FFFD may still carry."""

from __future__ import annotations

from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from events.json_text import without_nul

_encoder = msgspec.json.Encoder()


def text(value: str | None) -> str | None:
    """Text for a view column; NUL becomes U+FFFD."""
    return None if value is None else value.replace("\x00", "\ufffd")


def jsonb(value: Any) -> Jsonb:
    """JSON for a view column; the ledger's exact bytes stay in the ledger."""
    return Jsonb(value, dumps=_dumps)


def _dumps(value: Any) -> str:
    """The JSON text with NUL as U+FFFD (literal backslash-u0000 text kept as it was)."""
    return without_nul(_encoder.encode(value)).decode()
