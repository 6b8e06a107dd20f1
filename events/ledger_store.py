"""What every part of a ledger reads through: its recorder and how a stored event becomes a
domain event, a database error a ``LedgerUnavailable``, the recorder its PostgreSQL side.

The ledger's parts (its log, chains, database side, resumable runs) each hold this one object,
so none of them needs the ``Ledger`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent

from events.catalog import LedgerEvent
from events.codec import LedgerDecodeError, MsgspecMapper
from events.errors import LedgerReadError, LedgerUnavailable, NoDatabase
from events.memory_recorder import InMemoryRecorder
from events.postgres import drop_dead_connections
from events.recorder import OwlClawApplicationRecorder


class LedgerStore:
    """A ledger's recorder (PostgreSQL or in memory) and its mapper."""

    def __init__(
        self, recorder: OwlClawApplicationRecorder | InMemoryRecorder, mapper: MsgspecMapper
    ):
        self.recorder = recorder
        self._mapper = mapper

    def stream(self, stream_id: UUID) -> list[LedgerEvent]:
        """All events of one stream, in version order."""
        return self.decode_all(self.recorder.select_events(stream_id))

    def decode_all(self, stored: Sequence[StoredEvent]) -> list[LedgerEvent]:
        """Many stored events decoded, the keys they are sealed under read first in one query
        (``Sealer.warm``)."""
        if self._mapper.sealer is not None and len(stored) > 1:
            self._mapper.sealer.warm(s.state for s in stored)
        return [self.decode(s) for s in stored]

    def decode(self, stored: StoredEvent, position: int | None = None) -> LedgerEvent:
        """The domain event of a stored one; LedgerReadError names where one cannot be read."""
        try:
            event = self._mapper.to_domain_event(stored)
        except LedgerDecodeError as e:
            if position is None and isinstance(stored, Notification):
                position = stored.id
            raise LedgerReadError(e, position) from e
        assert isinstance(event, LedgerEvent)
        return event

    def unavailable(self, message: str, committed: bool | None = None) -> LedgerUnavailable:
        """The database did not answer: the pool's dead connections go now, so the caller's
        next try gets a live one once the server is back (``drop_dead_connections``)."""
        if isinstance(self.recorder, OwlClawApplicationRecorder):
            drop_dead_connections(self.recorder.datastore)
        return LedgerUnavailable(message, committed)

    def postgres(self) -> OwlClawApplicationRecorder:
        """The PostgreSQL recorder; NoDatabase for a ledger held in memory."""
        if not isinstance(self.recorder, OwlClawApplicationRecorder):
            raise NoDatabase(
                "the in-memory ledger has no PostgreSQL database: views, timers and memory "
                "need Ledger(database_url)"
            )
        return self.recorder
