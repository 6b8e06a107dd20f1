"""Stores ledger events as JSON through msgspec, plugged into eventsourcing as its Mapper.

Topic = event class name (``RunStarted``), or ``RunStarted@2`` from class version 2 on. Reading
an event at its current version is one typed msgspec decode; an older version is decoded to a
dict, passed through the class's ``upcast_vN_vN+1`` functions and converted; a newer version (a
newer OwlClaw wrote it) is refused, never read as the older class.

A NUL character (U+0000) in any text of an event (a tool's output, a model's message) is stored
as U+FFFD: PostgreSQL's jsonb cannot hold ``\\u0000``, and the ledger stays JSON text it reads
(``convert_from(state, 'UTF8')::jsonb``). Text that is not valid Unicode cannot be encoded at
all (msgspec refuses lone surrogates), so nothing else of that kind reaches the ledger.

With a ``Sealer`` (``events.sealing``), an event's sealed fields are stored encrypted under their
data key and opened on load; without one (a bare mapper) they are stored and read as they are.
Before that, its ``Redactor`` (``events.redaction``) replaces known secret values in the event's
plaintext: every event stored goes through here, whoever recorded it.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder

from events.catalog import EVENT_ALIASES, EVENT_TYPES, LedgerEvent
from events.json_text import without_nul
from events.redaction import Redactor
from events.sealing import SealedValueCorrupt, Sealer


class LedgerDecodeError(ValueError):
    """A stored event cannot be turned back into a domain event."""

    def __init__(self, message: str, originator_id: UUID | str, originator_version: int):
        super().__init__(message)
        self.originator_id = originator_id
        self.originator_version = originator_version


class UnknownEventType(LedgerDecodeError):
    """The stored topic names an event type this version of OwlClaw does not know."""

    def __init__(self, topic: str, originator_id: UUID | str, originator_version: int):
        super().__init__(
            f"unknown event type {topic!r} in stream {originator_id} version {originator_version}",
            originator_id,
            originator_version,
        )
        self.topic = topic


class CorruptEvent(LedgerDecodeError):
    """The stored payload does not decode into its event type."""


class NewerEventVersion(LedgerDecodeError):
    """The stored event is of a newer class version than this OwlClaw's class: a newer OwlClaw
    wrote it, and reading it as the older class could drop or misread its fields."""

    def __init__(self, topic: str, known: int, originator_id: UUID | str, originator_version: int):
        super().__init__(
            f"event {topic} in stream {originator_id} version {originator_version} was written "
            f"by a newer OwlClaw: this one reads {topic.partition('@')[0]} up to version "
            f"{known}; upgrade OwlClaw to read this ledger",
            originator_id,
            originator_version,
        )
        self.topic = topic


def topic_of(cls: type[LedgerEvent]) -> str:
    return cls.__name__ if cls.class_version == 1 else f"{cls.__name__}@{cls.class_version}"


def stored_topics(cls: type[LedgerEvent]) -> list[str]:
    """Every topic an event of ``cls`` may be stored under: each of its class versions (an
    upcaster reads the older ones), under its name and any name it had before."""
    names = [cls.__name__, *(old for old, new in EVENT_ALIASES.items() if new == cls.__name__)]
    return [
        name if version == 1 else f"{name}@{version}"
        for name in names
        for version in range(1, cls.class_version + 1)
    ]


def parse_topic(topic: str) -> tuple[str, int]:
    name, _, version = topic.partition("@")
    return EVENT_ALIASES.get(name, name), int(version) if version.isdigit() else 1


class _UnusedTranscoder(Transcoder):
    """eventsourcing's Mapper wants a transcoder; msgspec does the encoding instead."""

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError


_TYPE_INFO = threading.Lock()
MAX_PREPARED = 10_000
"""Events ``MsgspecMapper.prepare`` keeps for their appends at most."""


def _decoders() -> dict[type[LedgerEvent], msgspec.json.Decoder[Any]]:
    """A decoder per event type, made at once under one lock.

    msgspec (GIL builds) caches a Struct's type info on its class before filling it in, calling
    into Python meanwhile; another thread's first decode of that type can then read it half
    built (a host actor died of SIGSEGV in ``mpack_decode`` decoding AgentState in a thread
    while its ledger thread decoded events). Making every event type's decoder here builds the
    type info of all they hold (AgentState in AgentSnapshot too) before a run decodes any."""
    with _TYPE_INFO:
        return {cls: msgspec.json.Decoder(cls) for cls in EVENT_TYPES.values()}


class MsgspecMapper(Mapper[UUID]):
    def __init__(self, sealer: Sealer | None = None) -> None:
        super().__init__(transcoder=_UnusedTranscoder())
        self._decoders = _decoders()
        self._encoder = msgspec.json.Encoder()
        self.sealer = sealer
        """Seals content fields on store and opens them on load (None: stored as they are)."""
        self.redactor = Redactor()
        """Replaces secret values in an event before it is sealed and stored."""
        self._prepared: dict[tuple[UUID, int], tuple[LedgerEvent, StoredEvent]] = {}
        """Events stored ahead of their append (``prepare``), by stream position."""

    def prepare(self, domain_event: LedgerEvent) -> StoredEvent:
        """The event as it will be stored, kept for its append: ``Ledger.seal`` chains a run's
        pending events before they are appended, and their append then reuses these bytes
        instead of redacting, sealing and encoding each event again."""
        stored = self._store(domain_event)
        if len(self._prepared) >= MAX_PREPARED:  # appends that never came (a failed run)
            self._prepared.clear()
        self._prepared[(domain_event.originator_id, domain_event.originator_version)] = (
            domain_event,
            stored,
        )
        return stored

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        assert isinstance(domain_event, LedgerEvent), type(domain_event)
        position = (domain_event.originator_id, domain_event.originator_version)
        prepared = self._prepared.pop(position, None)
        if prepared is not None and prepared[0] is domain_event:
            return prepared[1]
        return self._store(domain_event)

    def _store(self, domain_event: LedgerEvent) -> StoredEvent:
        domain_event = self.redactor.event(domain_event)
        if self.sealer is not None:
            domain_event = self.sealer.seal_event(domain_event)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=topic_of(type(domain_event)),
            state=without_nul(self._encoder.encode(domain_event)),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        oid, version = stored_event.originator_id, stored_event.originator_version
        name, stored_class_version = parse_topic(stored_event.topic)
        cls = EVENT_TYPES.get(name)
        if cls is None:
            raise UnknownEventType(stored_event.topic, oid, version)
        if stored_class_version > cls.class_version:
            raise NewerEventVersion(stored_event.topic, cls.class_version, oid, version)
        try:
            if stored_class_version == cls.class_version:
                event = self._decoders[cls].decode(stored_event.state)
            else:
                state = msgspec.json.decode(stored_event.state)
                for v in range(stored_class_version, cls.class_version):
                    getattr(cls, f"upcast_v{v}_v{v + 1}")(state)
                event = msgspec.convert(state, cls)
            return event if self.sealer is None else self.sealer.open_event(event)
        except (
            msgspec.DecodeError,
            msgspec.ValidationError,
            UnicodeDecodeError,
            SealedValueCorrupt,
        ) as e:
            raise CorruptEvent(
                f"corrupt {name} event in stream {oid} version {version}: {e}", oid, version
            ) from e
