"""The tamper evidence of a ledger (``ledger.chains``): the stored hash chains, stream heads and
anchors, for verify, evidence bundles and seals. Apart from the log because a reader of events
never needs a hash, and an auditor needs nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from events import catalog as ev
from events.catalog import LedgerEvent
from events.errors import StreamConflict
from events.group_commit import GroupCommit
from events.hashchain import Row, VerifyReport
from events.heads import ANCHOR_STREAM_ID, Anchor, anchor_digest, anchored_heads
from events.ledger_store import LedgerStore
from events.streams import now

HEADS_GROUP = 256
"""Stream heads looked up per grouped query (``stream_head``)."""
ANCHOR_TRIES = 10
"""Anchors retried on top of a concurrent one before giving up."""


class LedgerChains:
    """Read the hash chains as stored, verify them, and anchor every stream's head."""

    def __init__(
        self,
        store: LedgerStore,
        append: Callable[[Sequence[LedgerEvent]], list[int]],
        archived: Callable[[UUID], list[Row]],
    ):
        """``append``: the ledger's ``append_events``, which an anchor commits through;
        ``archived``: an archived run's rows (``ledger.archive.rows``)."""
        self._store = store
        self._append = append
        self._archived = archived
        self._heads: GroupCommit[UUID, tuple[int, bytes] | None] = GroupCommit(
            self._lookup_heads, max_group=HEADS_GROUP
        )

    def chain_rows(self, streams: Sequence[UUID]) -> Iterator[Row]:
        """The stored rows of ``streams`` as stored (state bytes, log position, prev_hash, hash),
        stream by stream in the order given (each once), each by version: what an evidence
        bundle holds. An archived run's come from its archive file."""
        live = groupby(self._store.recorder.chain_rows(streams), key=lambda r: r[0])
        group = next(live, None)
        for stream in streams:
            if group is not None and group[0] == stream:
                yield from group[1]
                group = next(live, None)
            else:
                yield from self._archived(stream)

    def verify(self, streams: Sequence[UUID] | None = None) -> VerifyReport:
        """Recompute the hash chains of every stream, or of ``streams``."""
        return self._store.recorder.verify_chains(streams)

    def stream_heads(self, streams: Sequence[UUID] | None = None) -> dict[UUID, tuple[int, bytes]]:
        """Stream -> (last version, its hash) as stored now, of every stream or ``streams``."""
        return self._store.recorder.stream_heads(streams)

    def stream_head(self, stream: UUID) -> tuple[int, bytes] | None:
        """``stream``'s (last version, its hash) as stored now, None if it has no events. The
        lookups of concurrent callers share one query (``GroupCommit``): each agent's runtime
        checks its stream's head twice a run."""
        return self._heads.submit(stream)

    def _lookup_heads(self, streams: list[UUID]) -> list[tuple[int, bytes] | None]:
        try:
            heads = self._store.recorder.stream_heads(list(set(streams)))
        except PersistenceError as e:  # every caller of the group gets it
            raise self._store.unavailable(f"cannot look up stream heads: {e}") from e
        return [heads.get(s) for s in streams]

    def event_hashes(self, keys: Sequence[tuple[UUID, int]]) -> dict[tuple[UUID, int], bytes]:
        """(stream, version) -> the stored hash of that event, for the stored ones of ``keys``."""
        return self._store.recorder.event_hashes(keys)

    def anchor(self) -> Anchor:
        """Record the head of every stream as ``ChainsAnchored`` on the anchor stream; the
        anchor as printed for the operator. A concurrent anchor is retried on top of it."""
        for _ in range(ANCHOR_TRIES):
            heads = self.stream_heads()
            anchored = anchored_heads(heads)
            event = ev.ChainsAnchored(
                originator_id=ANCHOR_STREAM_ID,
                originator_version=heads.get(ANCHOR_STREAM_ID, (0, b""))[0] + 1,
                timestamp=now(),
                heads=anchored,
                digest=anchor_digest(anchored),
            )
            try:
                self._append([event])
                return Anchor.of(event)
            except StreamConflict:
                continue
        raise StreamConflict(f"anchor: still conflicting after {ANCHOR_TRIES} tries")

    def latest_anchor(self) -> Anchor | None:
        """The last anchor recorded in the ledger, if any."""
        stored = self._store.recorder.select_events(ANCHOR_STREAM_ID, desc=True, limit=1)
        if not stored:
            return None
        event = self._store.decode(stored[0])
        assert isinstance(event, ev.ChainsAnchored)
        return Anchor.of(event)
