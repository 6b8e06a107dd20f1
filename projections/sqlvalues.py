"""Values for view columns: PostgreSQL text and jsonb cannot hold NUL, the ledger can."""

from __future__ import annotations

from typing import Any

import msgspec
from psycopg.types.json import Jsonb

_encoder = msgspec.json.Encoder()


def text(value: str | None) -> str | None:
    """Text for a view column; NUL (legal in the ledger) becomes U+FFFD."""
    return None if value is None else value.replace("\x00", "\ufffd")


def jsonb(value: Any) -> Jsonb:
    """JSON for a view column; the ledger's exact bytes stay in the ledger."""
    return Jsonb(value, dumps=_dumps)


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode().replace("\\u0000", "\\ufffd")
