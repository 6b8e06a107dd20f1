"""A webhook request's JSON body, decoded into its typed structure or refused with the reason.

Refused, besides what msgspec refuses (malformed JSON, wrong types, unknown fields, lone
surrogates): bytes that are not UTF-8 (checked before msgspec, whose error for them is worded
differently in each release, so the caller gets the offending byte's reason), nesting deeper
than ``MAX_DEPTH`` (what is accepted must stay decodable wherever the ledger is read, and
msgspec gives up near Python's recursion limit), and NUL characters, which PostgreSQL's jsonb
cannot hold (the ledger's JSON must stay readable with SQL).

A body nested far deeper than ``MAX_DEPTH`` is refused before msgspec sees it: decoding it
would run into Python's recursion limit, and the RecursionError raised there could surface
while the interpreter reports an unrelated unraisable exception instead of in this module.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any, TypeVar

import msgspec

MAX_DEPTH = 64
"""Levels of objects and arrays a body may nest (the body's own object is level 1)."""

DECODE_DEPTH = 4 * MAX_DEPTH
"""Nesting refused before decoding; between ``MAX_DEPTH`` and this, the refusal names the
JSON path of the first level too deep."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_STEP = {ord("{"): 1, ord("["): 1, ord("}"): -1, ord("]"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _STEP)

T = TypeVar("T")


class BadBody(ValueError):
    """The body cannot be accepted; the message says why (and where, as a JSON path)."""


def decode_body(raw: bytes, kind: type[T]) -> T:
    """``raw`` (empty: ``{}``) as a ``kind``, or BadBody."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadBody(f"invalid body: not UTF-8 ({e.reason})") from None
    if deepest(raw) > DECODE_DEPTH:
        raise BadBody(f"invalid body: nested deeper than {MAX_DEPTH} levels")
    try:
        value = msgspec.json.decode(raw or b"{}", type=kind)
    except msgspec.DecodeError as e:
        raise BadBody(f"invalid body: {e}") from e
    problem = unstorable(value)
    if problem is not None:
        raise BadBody(f"invalid body: {problem}")
    return value


def deepest(raw: bytes) -> int:
    """How deep the brackets of ``raw`` nest outside its strings; only counted when there are
    more brackets than ``DECODE_DEPTH``, so ordinary bodies cost two byte counts."""
    if raw.count(b"{") + raw.count(b"[") <= DECODE_DEPTH:
        return 0
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def unstorable(value: Any) -> str | None:
    """Why ``value`` cannot be recorded as it is (None: it can): the JSON path of its first
    NUL character or of a level deeper than ``MAX_DEPTH``. Walked without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"NUL character (\\u0000) in {path}"
            continue
        if not isinstance(item, dict | list | msgspec.Struct):
            continue
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels at {path}"
        if isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return f"NUL character (\\u0000) in a key of {path}"
                stack.append((child, f"{path}.{key[:40]}", depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        else:
            stack.extend(
                (getattr(item, f), f"{path}.{f}", depth + 1) for f in item.__struct_fields__
            )
    return None
