"""The in-memory recorder of ``Ledger.in_memory()``: eventsourcing's POPO recorder plus what the
OwlClaw recorder adds in PostgreSQL — the hash chain and the reads the ledger makes.

For fast tests of code that needs a ledger but no read models: nothing is persisted, and there is
no database for views, timers or memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Notification,
    StoredEvent,
    Subscription,
)
from eventsourcing.popo import POPOApplicationRecorder, POPOFactory, POPOSubscription

from events.hashchain import GENESIS_HASH, Row, VerifyReport, row_hash, verify_rows


class InMemoryRecorder(POPOApplicationRecorder):
    """POPO application recorder that hash-chains each stream the way the SQL append does."""

    def __init__(self) -> None:
        super().__init__()
        self._links: list[tuple[bytes, bytes]] = []
        """(prev_hash, hash) of each stored event, by log position - 1."""
        self._blobs: dict[str, tuple[str, bytes]] = {}
        """sha256 -> (media type, bytes), the PostgreSQL ledger's blobs table."""

    def _update_table(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        # Called under the recorder's lock, after the uniqueness check.
        links = []
        previous, previous_stream, previous_version = GENESIS_HASH, None, 0
        for s in stored_events:
            if s.originator_id != previous_stream:
                previous_version, previous = self._last_before(
                    s.originator_id, s.originator_version
                )
            if s.originator_version != previous_version + 1:  # as the SQL append refuses it
                raise IntegrityError(
                    f"stream {s.originator_id}: version {s.originator_version} does not follow "
                    f"its last stored version {previous_version}"
                )
            previous_version = s.originator_version
            current = row_hash(previous, _uuid(s), s.originator_version, s.topic, s.state)
            links.append((previous, current))
            previous, previous_stream = current, s.originator_id
        ids = super()._update_table(stored_events, **kwargs)
        self._links.extend(links)
        return ids

    def _last_before(self, stream: UUID | str, version: int) -> tuple[int, bytes]:
        """The version and hash of the stream's latest event below ``version``; for a new
        stream, the version before its first (a stream starts at 1, or 0) and genesis."""
        index = self._stored_events_index[str(stream)]
        below = (
            version - 1
            if version - 1 in index
            else max(filter(version.__gt__, index), default=None)
        )
        if below is None:
            return min(version, 1) - 1, GENESIS_HASH
        return below, self._links[index[below]][1]

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        return _Subscription(recorder=self, gt=gt, topics=topics)

    def _notify_listeners(self) -> None:
        for listener in list(self._listeners):  # a subscription may start meanwhile
            listener.set()

    def select_stream_notifications(
        self, originator_ids: Sequence[UUID], after: int = 0, limit: int | None = None
    ) -> list[Notification]:
        """The events of the given streams after log position ``after`` (at most ``limit``), in
        global log order."""
        with self._database_lock:
            positions = sorted(
                i
                for o in originator_ids
                for i in self._stored_events_index[str(o)].values()
                if i + 1 > after
            )[:limit]
            return [_notification(i + 1, self._stored_events[i]) for i in positions]

    def has_event_once(self, originator_id: UUID, originator_version: int) -> bool:
        with self._database_lock:
            return originator_version in self._stored_events_index[str(originator_id)]

    def is_held_back(self, after: int) -> bool:
        """Never: appends are visible to readers in position order as they are made."""
        return False

    def max_committed_notification_id(self) -> int | None:
        """The head: nothing committed is ever held back here."""
        return self.max_notification_id()

    def stream_heads(self, streams: Sequence[UUID] | None = None) -> dict[UUID, tuple[int, bytes]]:
        """Stream -> (last version, its hash), of every stream or of ``streams``."""
        with self._database_lock:
            names = list(self._stored_events_index) if streams is None else map(str, streams)
            heads = {}
            for name in names:
                index = self._stored_events_index.get(name)
                if index:
                    last = max(index)
                    heads[UUID(name)] = (last, self._links[index[last]][1])
            return heads

    def event_hashes(self, keys: Sequence[tuple[UUID, int]]) -> dict[tuple[UUID, int], bytes]:
        """(stream, version) -> the stored event's hash, for those of ``keys`` that are stored."""
        with self._database_lock:
            found = {}
            for stream, version in keys:
                i = self._stored_events_index.get(str(stream), {}).get(version)
                if i is not None:
                    found[(stream, version)] = self._links[i][1]
            return found

    def insert_blob(self, sha256: str, media_type: str, data: bytes) -> None:
        """Store ``data`` under ``sha256`` unless a blob is stored there already."""
        with self._database_lock:
            self._blobs.setdefault(sha256, (media_type, data))

    def select_blob(self, sha256: str) -> tuple[str, bytes] | None:
        """The media type and bytes stored under ``sha256``, None if there are none."""
        with self._database_lock:
            return self._blobs.get(sha256)

    def verify_chains(self, streams: Sequence[UUID] | None = None) -> VerifyReport:
        """Recompute the hash chains of every stream (or ``streams``)."""
        return verify_rows(self.chain_rows(streams))

    def chain_rows(self, streams: Sequence[UUID] | None = None) -> list[Row]:
        """The stored events with their hashes: every stream ordered by id, or ``streams`` in
        the order given; each stream by version."""
        with self._database_lock:
            if streams is None:
                streams = sorted(UUID(s) for s, index in self._stored_events_index.items() if index)
            rows = []
            for stream in streams:
                index = self._stored_events_index.get(str(stream), {})
                for version in sorted(index):
                    i = index[version]
                    s = self._stored_events[i]
                    prev_hash, hash_ = self._links[i]
                    rows.append((stream, version, s.topic, s.state, i + 1, prev_hash, hash_))
            return rows


class _Subscription(POPOSubscription):
    """POPOSubscription starts reading before it listens: an append in between woke nobody and
    the subscription waited forever. Read once more after listening."""

    def __init__(
        self, recorder: POPOApplicationRecorder, gt: int | None = None, topics: Sequence[str] = ()
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._has_been_notified.set()


class InMemoryFactory(POPOFactory):
    """eventsourcing infrastructure factory whose application recorder is ``InMemoryRecorder``."""

    def application_recorder(self) -> ApplicationRecorder:
        return InMemoryRecorder()


def _uuid(stored: StoredEvent) -> UUID:
    o = stored.originator_id
    return o if isinstance(o, UUID) else UUID(o)


def _notification(position: int, s: StoredEvent) -> Notification:
    return Notification(
        id=position,
        originator_id=s.originator_id,
        originator_version=s.originator_version,
        topic=s.topic,
        state=s.state,
    )
