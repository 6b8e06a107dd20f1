"""What the model and the ledger are given of a tool's result: JSON-safe, printable, truncated.

Its own module because the pipeline, the live execution, the run's recorded steps, the model
adapters and audit all encode results the same way, and none of them needs the pipeline for it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from owlclaw.tools.errors import ToolError

REJECTED_TEXT_CHARS = 2000


def json_safe(value: Any) -> bytes:
    """Any result as JSON: what msgspec encodes natively (sets, datetimes, bytes, Structs,
    dataclasses…) as it encodes it; anything else (an object of the app's own class) as its
    string form; text that is not valid Unicode with its bad characters replaced."""
    try:
        return msgspec.json.encode(value, enc_hook=_repr)
    except UnicodeEncodeError:
        return msgspec.json.encode(_clean(value), enc_hook=_repr)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return msgspec.json.encode(printable(_repr(value)))


def _clean(value: Any) -> Any:
    match value:
        case str():
            return printable(value)
        case dict():
            return {printable(str(k)): _clean(v) for k, v in value.items()}
        case list() | tuple() | set() | frozenset():
            return [_clean(v) for v in value]
    return value


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as e:
        return f"<{type(value).__name__} (repr failed: {type(e).__name__})>"


def printable(text: str) -> str:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode()
    return text


def truncate(encoded: bytes, limit: int) -> tuple[str, bool]:
    """The JSON text, or its first ``limit`` bytes cut at a clean boundary (a whole character,
    and the last line break, comma or space in the final tenth when there is one) with a marker
    saying how much was cut."""
    if len(encoded) <= limit:
        return encoded.decode(), False
    head = encoded[:limit].decode(errors="ignore")
    floor = len(head) - max(1, len(head) // 10)
    clean = max(head.rfind(sep, floor) for sep in ("\n", ",", " "))
    if clean > 0:
        head = head[: clean + 1]
    cut = len(encoded) - len(head.encode())
    return f"{head}\n[truncated: {cut} of {len(encoded)} bytes cut]", True


def encode_told(error: ToolError) -> str:
    return msgspec.json.encode(error).decode()


def canonical_arguments(arguments: str) -> str:
    """The arguments parsed and key-sorted, so calls that differ only in formatting or key
    order compare equal; text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments
