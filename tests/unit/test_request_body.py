"""Webhook bodies: what is decoded, and what is refused with a reason before anything is
recorded (deep nesting, bytes that are not UTF-8, NUL characters)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from owlclaw.messages import Fire
from owlclaw.server.request_body import DECODE_DEPTH, MAX_DEPTH, BadBody, decode_body
from owlclaw.server.webhook import AnswerBody, EventBody, TriggerBody


def nested(levels: int) -> bytes:
    """A trigger body whose payload makes the whole body ``levels`` deep."""
    inner: Any = 1
    for _ in range(levels - 1):
        inner = {"a": inner}
    return json.dumps({"payload": inner}).encode()


def test_a_body_is_decoded_into_its_structure() -> None:
    body = decode_body(b'{"focus": "check", "payload": {"n": [1, {"k": "v"}]}}', TriggerBody)
    assert body == TriggerBody(focus="check", payload={"n": [1, {"k": "v"}]})
    assert decode_body(b"", EventBody) == EventBody()


def test_nesting_is_accepted_up_to_max_depth_and_refused_beyond() -> None:
    assert decode_body(nested(MAX_DEPTH), TriggerBody).payload
    with pytest.raises(BadBody, match=f"nested deeper than {MAX_DEPTH} levels at \\$.payload.a"):
        decode_body(nested(MAX_DEPTH + 1), TriggerBody)


@pytest.mark.parametrize("levels", [1_000, 5_000, 100_000])
def test_a_body_nested_thousands_of_levels_is_refused(levels: int) -> None:
    objects = b'{"payload": ' + b'{"a": ' * levels + b"1" + b"}" * (levels + 1)
    arrays = b'{"payload": {"a": ' + b"[" * levels + b"]" * levels + b"}}"
    for raw in (objects, arrays):
        with pytest.raises(BadBody, match="nested deeper than"):
            decode_body(raw, TriggerBody)


def test_nesting_below_the_decode_depth_is_refused_with_its_path() -> None:
    with pytest.raises(BadBody, match=f"nested deeper than {MAX_DEPTH} levels at \\$.payload.a"):
        decode_body(nested(DECODE_DEPTH), TriggerBody)
    with pytest.raises(BadBody, match=f"nested deeper than {MAX_DEPTH} levels$"):
        decode_body(nested(DECODE_DEPTH + 1), TriggerBody)


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = '[{ \\" ' * DECODE_DEPTH
    raw = json.dumps({"focus": text, "payload": {"k": ["]" * 300, '"[' * 300]}}).encode()
    body = decode_body(raw, TriggerBody)
    assert body.focus == text
    assert body.payload == {"k": ["]" * 300, '"[' * 300]}


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(BadBody, match="not UTF-8 \\(invalid start byte\\)"):
        decode_body(b'{"focus": "\xff\xfe"}', TriggerBody)
    with pytest.raises(BadBody, match="not UTF-8"):
        decode_body(b'{"payload": {"k": "\xc3"}}', TriggerBody)


@pytest.mark.parametrize(
    ("raw", "kind", "where"),
    [
        (b'{"focus": "a\\u0000b"}', TriggerBody, "in \\$.focus"),
        (b'{"payload": {"list": ["ok", "\\u0000"]}}', TriggerBody, "in \\$.payload.list\\[1\\]"),
        (b'{"payload": {"k\\u0000": 1}}', TriggerBody, "in a key of \\$.payload"),
        (b'{"source": "\\u0000"}', EventBody, "in \\$.source"),
        (b'{"decision": "deny", "note": "\\u0000"}', AnswerBody, "in \\$.note"),
        (
            b'{"agent_id": "a\\u0000", "schedule_id": "s", "fire_time": "2026-01-01T00:00:00Z"}',
            Fire,
            "in \\$.agent_id",
        ),
    ],
)
def test_a_nul_character_anywhere_is_refused_naming_where(
    raw: bytes, kind: type[Any], where: str
) -> None:
    with pytest.raises(BadBody, match=f"NUL character \\(\\\\u0000\\) {where}"):
        decode_body(raw, kind)


def test_what_msgspec_refuses_stays_refused() -> None:
    for raw in (b"{", b"[]", b'{"focus": 1}', b'{"extra": 1}', b'{"focus": "\\ud800"}'):
        with pytest.raises(BadBody, match="invalid body"):
            decode_body(raw, TriggerBody)
