"""Secrets out of the ledger: the values of the environment variables an app names as secrets,
replaced by ``[redacted:NAME]`` in every event before it is stored (``events.codec``, ahead of
sealing, on plaintext) and in traces.

Each value is caught in the forms it commonly leaks in: as it is; base64 (standard and
URL-safe alphabets, padded or not, and at each of the three byte alignments it can have inside
a longer encoded text); and URL-encoded (``%XX``, with ``+`` or ``%20`` for a space). A value
shorter than ``MIN_SECRET_CHARS`` is not redacted: replacing every occurrence of a 3-character
string would shred ordinary text, so such a value is reported (``too_short``) for the caller to
refuse or warn about. A secret the model paraphrases, splits or re-encodes otherwise still
leaks: redaction is a net, not a reason to hand secrets to tools.

Every event stored goes through here and most hold no secret, so a value is first encoded to
JSON once and searched for the forms as JSON escapes them (``found``); only a value where one
turns up has its strings walked and replaced. Replacing is done on the strings, never on the
JSON text: a form found outside a string's characters (in a number, across an escape sequence)
is left as it is, and what is stored stays valid JSON of the same types.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

import msgspec

MIN_SECRET_CHARS = 8
HEADER = frozenset({"originator_id", "originator_version", "timestamp"})
"""An event's stream position: never content, never redacted."""

T = TypeVar("T")


def marker(name: str) -> str:
    """What a secret's value is replaced with."""
    return f"[redacted:{name}]"


def json_escaped(text: str) -> bytes:
    """``text`` as it is inside a JSON string of msgspec's: each character escaped on its own,
    so a text holding ``text`` encodes to JSON holding this."""
    return msgspec.json.encode(text)[1:-1]


def leaked_forms(value: str) -> set[str]:
    """The texts that reveal ``value``: itself, its base64 and URL-encoded forms."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value, safe="")}
    for shift in range(3):
        padded = base64.b64encode(b"\0" * shift + raw).decode()
        # the characters that hold only the value's bits, whatever bytes surround it
        start = -(-shift * 8 // 6)
        end = (shift + len(raw)) * 8 // 6
        encoded = [padded[start:end]]
        if shift == 0:
            encoded += [padded, padded.rstrip("=")]
        for text in encoded:
            forms |= {text, text.replace("+", "-").replace("/", "_")}
    return {form for form in forms if form}


class Redactor:
    """Replaces known secret values in text, JSON-like values and events."""

    def __init__(self, secrets: Mapping[str, str] | None = None):
        """``secrets``: variable name -> its value."""
        secrets = secrets or {}
        self.too_short = sorted(n for n, v in secrets.items() if len(v) < MIN_SECRET_CHARS)
        """Names whose value is too short to redact (left as it is)."""
        self.names: dict[str, str] = {}
        """Each caught form -> the name of the secret it reveals."""
        for name, value in sorted(secrets.items()):
            if len(value) >= MIN_SECRET_CHARS:
                for form in leaked_forms(value):
                    self.names.setdefault(form, name)
        forms = sorted(self.names, key=lambda f: (-len(f), f))  # the longest form first
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        escaped = {json_escaped(form) for form in forms}
        self._escaped = tuple(sorted(f for f in escaped if not any(g in f for g in escaped - {f})))
        """What ``found`` searches for: the escaped forms holding no other (finding one of
        those is enough)."""
        self._json_names = {json_escaped(form).decode(): self.names[form] for form in forms}
        self._json_pattern = (
            re.compile("|".join(map(re.escape, self._json_names))) if forms else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every caught form of a secret replaced by its marker."""
        if self._pattern is None or not self._holds(text):
            return text
        return self._replace(text)

    def _replace(self, text: str) -> str:
        assert self._pattern is not None  # a redactor without secrets replaces nothing
        return self._pattern.sub(lambda m: marker(self.names[m.group()]), text)

    def found(self, json_text: bytes) -> bool:
        """Whether this JSON text (msgspec's encoding of a value) may hold a caught form of a
        secret in one of its strings: never False when one does; True now and then when none
        does (a form in a number, or in an escape sequence)."""
        return max(map(json_text.find, self._escaped), default=-1) >= 0  # faster than `in`

    def _holds(self, value: Any) -> bool:
        try:
            return self.found(msgspec.json.encode(value))
        except (TypeError, msgspec.EncodeError):  # no JSON: its strings are walked
            return True

    def json_text(self, text: str) -> str:
        """A JSON text (what a model is told of a tool call) as the JSON of its value redacted,
        so it reads exactly as the recorded value does; a text that is not JSON (a result cut
        short) has each form replaced as JSON escapes it."""
        if self._json_pattern is None or not self.found(text.encode()):
            return text
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return self._json_pattern.sub(lambda m: marker(self._json_names[m.group()]), text)
        return msgspec.json.encode(self._value(value)).decode()

    def value(self, value: T) -> T:
        """A JSON-like value (or a msgspec struct) with every string in it redacted, dict keys
        included; anything else (numbers, ids, times) as it is."""
        if self._pattern is None or not self._holds(value):
            return value
        return self._value(value)  # type: ignore[no-any-return]

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._replace(value)
        if isinstance(value, dict):
            return {self._value(k): self._value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._value(v) for v in value)
        if isinstance(value, msgspec.Struct):
            return self._struct(value, ())
        return value

    def _struct(self, value: Any, keep: frozenset[str] | tuple[()]) -> Any:
        changes = {}
        for field in value.__struct_fields__:
            if field in keep:
                continue
            old = getattr(value, field)
            new = self._value(old)
            if new != old:
                changes[field] = new
        return msgspec.structs.replace(value, **changes) if changes else value

    def event(self, event: T) -> T:
        """The event with every field but its stream position redacted."""
        if self._pattern is None or not self._holds(event):
            return event
        return self._struct(event, HEADER)  # type: ignore[no-any-return]


class KnownSecrets:
    """The secrets known so far in this process (apps load one by one; a value never stops
    being a secret), and the one redactor of all of them."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self.redactor = Redactor()

    def add(self, secrets: Mapping[str, str]) -> Redactor:
        """Redact these (name -> value) too; the redactor of every secret known now."""
        if any(self._values.get(name) != value for name, value in secrets.items()):
            self._values = {**self._values, **secrets}
            self.redactor = Redactor(self._values)
        return self.redactor
