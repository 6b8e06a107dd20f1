"""The global log of a ledger (``ledger.log``): every event of every stream in commit order,
read by position and followed, which is all the views, timers and analytics consume.

Archived runs' events stay in the log at their positions: a read whose range covers them merges
them in from their archive files (``events.ledger_archive``), so a view rebuilt from position 0
after an archiving sees exactly the events it would have seen before it."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

from eventsourcing.persistence import Notification, PersistenceError

from events.catalog import LedgerEvent
from events.codec import stored_topics
from events.ledger_archive import LedgerArchive
from events.ledger_store import LedgerStore


@dataclass(frozen=True)
class LoggedEvent:
    """An event with its position in the global log."""

    position: int
    event: LedgerEvent


class LedgerLog:
    """Read and follow the global log."""

    def __init__(self, store: LedgerStore, archive: LedgerArchive):
        self._store = store
        self._archive = archive

    def read(
        self,
        after: int = 0,
        limit: int = 1000,
        *,
        up_to: int | None = None,
        types: Sequence[type[LedgerEvent]] = (),
    ) -> list[LoggedEvent]:
        """Up to ``limit`` events after log position ``after`` (and at most ``up_to``), in log
        order; only events of ``types`` if given (filtered in the database), archived ones
        included.

        The archive is looked at after the table: a run archived in between has its seal
        committed (and readable) before its rows left the table, so it is found in one place
        or the other, or both (the same position, once)."""
        topics = [topic for t in types for topic in stored_topics(t)]
        try:
            notifications = self._store.recorder.select_notifications(
                start=after, limit=limit, stop=up_to, topics=topics, inclusive_of_start=False
            )
            if not types or any(t.stream == "run" for t in types):  # only runs are archived
                end = notifications[-1].id if len(notifications) == limit else up_to
                archived = self._archive.in_log(after, end, topics, limit)
                if archived:
                    merged = {n.id: n for n in (*archived, *notifications)}
                    notifications = [merged[p] for p in sorted(merged)[:limit]]
        except PersistenceError as e:
            raise self._store.unavailable(f"cannot read the ledger: {e}") from e
        return self.logged(notifications)

    def logged(self, notifications: Sequence[Notification]) -> list[LoggedEvent]:
        """Rows of the log decoded as a batch (``LedgerStore.decode_all``), each at its
        position."""
        events = self._store.decode_all(notifications)
        return [LoggedEvent(n.id, e) for n, e in zip(notifications, events, strict=True)]

    def head(self) -> int:
        """The position of the last event readers can see (0 for an empty ledger)."""
        return self._store.recorder.max_notification_id() or 0

    def last_committed(self) -> int:
        """The position of the last committed event, also while an older open transaction
        holds it back from readers: what a reader must reach to have seen every event committed
        so far (``head`` reaches it once that transaction ends)."""
        try:
            return self._store.recorder.max_committed_notification_id() or 0
        except PersistenceError as e:
            raise self._store.unavailable(f"cannot read the ledger: {e}") from e

    def subscribe(self, after: int = 0) -> Generator[LoggedEvent]:
        """Follow the log from ``after``, woken by LISTEN/NOTIFY; runs until closed."""
        with self._store.recorder.subscribe(gt=after) as subscription:
            for n in subscription:
                yield LoggedEvent(n.id, self._store.decode(n, n.id))

    def is_held_back(self, after: int) -> bool:
        """True while committed events above log position ``after`` are not yet readable
        because an older transaction is still open (poll briefly instead of waiting for a
        wake-up). Always False in memory."""
        return self._store.recorder.is_held_back(after)
