"""Data keys: the keys content that may hold personal data is encrypted under (``events.sealing``),
one per agent, per run and per remembered memory, so destroying one erases exactly that content.

A key is named by its scope (``DataKey``): its id is derived from scope and scope id, so any
process finds the key an event needs without a lookup table. ``KeyStore`` is where keys live:
the ledger's own ``ledger_keys`` table (``events.key_table``) or, for the in-memory ledger, a
dict here. A destroyed key's bytes are gone (NULL); what names it (scope, who destroyed it, why)
stays.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Literal, Protocol
from uuid import NAMESPACE_URL, UUID, uuid5

from events.streams import now

KeyScope = Literal["agent", "run", "memory"]
KEY_SCOPES: tuple[KeyScope, ...] = ("agent", "run", "memory")
KEY_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/data-key")


@lru_cache(maxsize=4096)
def key_id_of(scope: KeyScope, scope_id: UUID) -> UUID:
    """The id of the data key of ``scope`` ``scope_id`` (deterministic). Cached: a run's
    commits seal each of its events under its run's key (uuid5: ~4 µs, 15 times a run)."""
    return uuid5(KEY_NAMESPACE, f"{scope}:{scope_id}")


@dataclass(frozen=True)
class DataKey:
    """Which key an event's content is sealed under: an agent (its stream id), a run (its run
    id) or a memory (its memory id); ``agent`` is the agent stream it belongs to, recorded with
    the key when it is made (None when the event does not say: the key already exists)."""

    scope: KeyScope
    scope_id: UUID
    agent: UUID | None = None

    @property
    def key_id(self) -> UUID:
        return key_id_of(self.scope, self.scope_id)


@dataclass(frozen=True)
class KeyRecord:
    """A key as the store holds it (without its bytes)."""

    key_id: UUID
    scope: KeyScope
    scope_id: UUID
    agent: UUID | None
    created_at: datetime
    destroyed_at: datetime | None = None
    destroyed_by: str = ""
    reason: str = ""


class KeyDestroyed(ValueError):
    """Content was to be sealed under a key that was destroyed (its scope was erased)."""


def new_key() -> bytes:
    """A fresh AES-256 key."""
    return os.urandom(32)


class KeyStore(Protocol):
    def obtain(self, ref: DataKey) -> bytes:
        """The key of ``ref``, made now if it has none; KeyDestroyed if it was destroyed."""
        ...

    def get(self, key_id: UUID) -> bytes | None:
        """The key's bytes; None when it was destroyed (or never made)."""
        ...

    def warm(self, key_ids: Collection[UUID]) -> None:
        """Have these keys at hand for the ``get`` calls about to follow (a batch of events
        read: each memory has its own key)."""
        ...

    def records(
        self, *, key_ids: list[UUID] | None = None, agent: UUID | None = None
    ) -> list[KeyRecord]:
        """The keys with these ids, or all keys of one agent stream."""
        ...

    def destroy(self, key_ids: list[UUID], by: str, reason: str) -> int:
        """Destroy the keys (their bytes become NULL); how many were still live."""
        ...


class InMemoryKeyStore:
    """The keys of an in-memory ledger."""

    def __init__(self) -> None:
        self._records: dict[UUID, KeyRecord] = {}
        self._keys: dict[UUID, bytes | None] = {}

    def obtain(self, ref: DataKey) -> bytes:
        if ref.key_id not in self._keys:
            self._records[ref.key_id] = KeyRecord(
                ref.key_id, ref.scope, ref.scope_id, ref.agent, now()
            )
            self._keys[ref.key_id] = new_key()
        key = self._keys[ref.key_id]
        if key is None:
            raise KeyDestroyed(f"the {ref.scope} key of {ref.scope_id} was destroyed (erased)")
        return key

    def get(self, key_id: UUID) -> bytes | None:
        return self._keys.get(key_id)

    def warm(self, key_ids: Collection[UUID]) -> None:
        """Nothing to read: the keys are in this dict."""

    def records(
        self, *, key_ids: list[UUID] | None = None, agent: UUID | None = None
    ) -> list[KeyRecord]:
        return [
            r
            for r in self._records.values()
            if (key_ids is None or r.key_id in key_ids) and (agent is None or r.agent == agent)
        ]

    def destroy(self, key_ids: list[UUID], by: str, reason: str) -> int:
        destroyed = 0
        for key_id in key_ids:
            if self._keys.get(key_id) is None:
                continue
            self._keys[key_id] = None
            record = self._records[key_id]
            self._records[key_id] = KeyRecord(
                key_id,
                record.scope,
                record.scope_id,
                record.agent,
                record.created_at,
                now(),
                by,
                reason,
            )
            destroyed += 1
        return destroyed
