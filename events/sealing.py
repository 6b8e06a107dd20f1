"""Envelopes: content that may hold personal data, stored encrypted under its data key
(``events.keys``) in the ledger and in the views, so destroying the key erases it everywhere
while the hash chain, computed over the stored bytes, still holds.

A text field is stored as the string ``owlclaw-sealed:1:<key id>:<base64 nonce+ciphertext>``;
any other value as ``{"owlclaw_sealed": "<that string>"}`` (its JSON text encrypted), so the
event keeps its type. AES-256-GCM, with the key id as associated data. The nonce is derived from
the key and the field's place (stream, version, field) and its plaintext (a synthetic IV):
sealing the same event twice gives the same bytes, which ``Ledger.seal`` relies on to compute a
run's head before it is stored, and a view re-seals a field to exactly what the ledger holds.

Opening an envelope whose key was destroyed gives ``ERASED_TEXT`` or ``ERASED_VALUE``, never an
error; a value that is not an envelope (a ledger written before encryption, or with it off) is
returned as it is.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable
from typing import Any, TypeVar
from uuid import UUID

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from events.catalog import LedgerEvent
from events.json_text import without_nul
from events.keys import DataKey, KeyDestroyed, KeyStore

PREFIX = "owlclaw-sealed:1:"
_KEY_IDS = re.compile(re.escape(PREFIX.encode()) + rb"([0-9a-f-]{36}):")
"""The key ids named by the envelopes in an event's stored bytes (JSON: a PREFIX is not escaped)."""
SEALED_KEY = "owlclaw_sealed"
ERASED_TEXT = "[erased]"
ERASED_VALUE: dict[str, Any] = {"erased": True}

E = TypeVar("E", bound=LedgerEvent)


class SealedValueCorrupt(ValueError):
    """An envelope does not open under its (live) key: its bytes were changed."""


def envelope_text(value: Any) -> str | None:
    """The envelope string ``value`` holds, or None if it is not an envelope."""
    if isinstance(value, str) and value.startswith(PREFIX):
        return value
    if isinstance(value, dict) and len(value) == 1:
        inner = value.get(SEALED_KEY)
        if isinstance(inner, str) and inner.startswith(PREFIX):
            return inner
    return None


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | dict | list) and not value)


class Sealer:
    """Seals and opens the sealed fields of events (``LedgerEvent.sealed``) with a key store;
    ``encrypt=False`` stores new content in plaintext but still opens envelopes."""

    def __init__(self, keys: KeyStore, *, encrypt: bool = True):
        self.keys = keys
        self.encrypt = encrypt
        self._encoder = msgspec.json.Encoder()

    def make_key(self, ref: DataKey) -> None:
        """Make ``ref``'s key now, before any content needs it (an agent's, as it registers),
        unless new content is stored in plaintext."""
        if self.encrypt:
            self.keys.obtain(ref)

    def seal_event(self, event: E) -> E:
        """The event as stored: each non-empty sealed field in an envelope (KeyDestroyed if its
        key was destroyed)."""
        if not self.encrypt:
            return event
        event = event.with_content(self._seal_inside)
        ref = event.data_key() if event.sealed else None
        if ref is None:
            return event
        changes = {}
        for field in event.sealed:
            value = getattr(event, field)
            if not _empty(value) and envelope_text(value) is None:
                key = self.keys.obtain(ref)
                changes[field] = self._seal(ref.key_id, key, event, field, value)
        return msgspec.structs.replace(event, **changes) if changes else event

    def open_event(self, event: E) -> E:
        """The event with each sealed field opened (or erased)."""
        event = event.with_content(lambda _, __, value: self.open(value))
        changes = {}
        for field in event.sealed:
            value = getattr(event, field)
            if envelope_text(value) is not None:
                changes[field] = self.open(value)
        return msgspec.structs.replace(event, **changes) if changes else event

    def warm(self, states: Iterable[bytes]) -> None:
        """Read the keys the envelopes in these stored events name, in one go, before they
        are opened one by one."""
        key_ids = {UUID(m.decode()) for state in states for m in _KEY_IDS.findall(state)}
        if key_ids:
            self.keys.warm(key_ids)

    def stored(self, event: LedgerEvent, field: str) -> Any:
        """What the ledger stores for ``field`` of ``event`` (as decoded), for a view to keep
        the envelope, never the plaintext: sealed when its key is live, whatever this process's
        ``encrypt``; as it is when it has no key (stored before encryption, or without it) or
        was erased (the marker)."""
        value = getattr(event, field)
        ref = event.data_key()
        key = None if ref is None or _empty(value) else self.keys.get(ref.key_id)
        if ref is None or key is None or value in (ERASED_TEXT, ERASED_VALUE):
            return value
        return self._seal(ref.key_id, key, event, field, value)

    def open(self, value: Any) -> Any:
        """The content of an envelope (the erased marker if its key is destroyed); any other
        value as it is."""
        text = envelope_text(value)
        if text is None:
            return value
        key_part, _, body = text[len(PREFIX) :].partition(":")
        try:
            key_id = UUID(key_part)
            sealed = base64.b64decode(body, validate=True)
        except ValueError as e:
            raise SealedValueCorrupt(f"malformed sealed value: {e}") from e
        key = self.keys.get(key_id)
        if key is None:
            return ERASED_TEXT if isinstance(value, str) else ERASED_VALUE
        try:
            plain = AESGCM(key).decrypt(sealed[:12], sealed[12:], key_id.bytes)
        except InvalidTag as e:
            raise SealedValueCorrupt(f"a value sealed under key {key_id} does not open") from e
        return plain.decode() if isinstance(value, str) else msgspec.json.decode(plain)

    def _seal_inside(self, ref: DataKey, place: str, value: Any) -> Any:
        """A value nested in an event (a snapshot's state) as stored: sealed, or the erased
        marker when its key was destroyed (a state loaded before the erasure still held it:
        never stored in plaintext)."""
        if (
            _empty(value)
            or envelope_text(value) is not None
            or value in (ERASED_TEXT, ERASED_VALUE)
        ):
            return value
        try:
            key = self.keys.obtain(ref)
        except KeyDestroyed:
            return ERASED_TEXT if isinstance(value, str) else ERASED_VALUE
        return self._seal_at(ref.key_id, key, place, value)

    def _seal(self, key_id: UUID, key: bytes, event: LedgerEvent, field: str, value: Any) -> Any:
        place = f"{event.originator_id}:{event.originator_version}:{field}"
        return self._seal_at(key_id, key, place, value)

    def _seal_at(self, key_id: UUID, key: bytes, place: str, value: Any) -> Any:
        plain = (
            value.replace("\x00", "\ufffd").encode()
            if isinstance(value, str)
            else without_nul(self._encoder.encode(value))
        )
        nonce = hmac.new(key, f"{place}\x00".encode() + plain, hashlib.sha256).digest()[:12]
        sealed = AESGCM(key).encrypt(nonce, plain, key_id.bytes)
        text = f"{PREFIX}{key_id}:{base64.b64encode(nonce + sealed).decode()}"
        return text if isinstance(value, str) else {SEALED_KEY: text}
