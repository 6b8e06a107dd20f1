"""Recomputes the per-stream hash chains the recorders write (PostgreSQL in SQL, in-memory here).

Row hash = sha256(prev_hash || "<stream>:<version>:<topic>" || 0x00 || state); each row's
``prev_hash`` must equal the previous row's hash (32 zero bytes for a stream's first event).
Changing any stored byte, deleting or reordering rows breaks the chain at that row. Deleting a
stream's last rows (or the whole stream) leaves a shorter chain that still holds: that is found
against the heads committed elsewhere (``events.heads``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import psycopg
from psycopg import sql

GENESIS_HASH = bytes(32)
"""The ``prev_hash`` of a stream's first event."""

Row = tuple[UUID, int, str, bytes, int, bytes, bytes]
"""stream, version, topic, state, log position, prev_hash, hash"""


def row_hash(prev_hash: bytes, stream: UUID, version: int, topic: str, state: bytes) -> bytes:
    header = f"{stream}:{version}:{topic}".encode()
    return hashlib.sha256(prev_hash + header + b"\x00" + state).digest()


@dataclass(frozen=True)
class ChainBreak:
    stream: UUID
    version: int
    position: int
    reason: str

    def __str__(self) -> str:
        return (
            f"stream {self.stream} version {self.version} "
            f"(log position {self.position}): {self.reason}"
        )


@dataclass(frozen=True)
class HeadMismatch:
    """A stream that no longer ends where a head committed elsewhere says it did (a run's
    RunSealed on its agent's stream, or an anchor): what was expected and what was found."""

    stream: UUID
    label: str
    """What the stream is: "agent A", "agent A run N", or the stream id."""
    expected_version: int
    expected_hash: str
    """Hex; empty when only the stream's existence was expected (a queued run)."""
    found_version: int | None
    """The stream's last version now (None: the stream is gone)."""
    found_hash: str | None
    """The hash now stored at the expected version (None: no event there)."""
    by: str
    """Where the expected head is committed ("RunSealed at agent version 7", "anchor 3")."""
    reason: str

    def __str__(self) -> str:
        found = (
            "no stream"
            if self.found_version is None
            else f"last version {self.found_version}, hash at version {self.expected_version}"
            f" {self.found_hash or 'none'}"
        )
        hash_ = f" hash {self.expected_hash}" if self.expected_hash else ""
        return (
            f"{self.label} (stream {self.stream}): {self.reason}; expected version "
            f"{self.expected_version}{hash_} ({self.by}), found {found}"
        )


@dataclass(frozen=True)
class ArchiveProblem:
    """An archive file that does not hold what its ArchiveSealed says: missing, unreadable,
    altered, or a run in it that differs from its sealed head."""

    file: str
    by: str
    """The ArchiveSealed that accounts for it ("ArchiveSealed at agent A version 7")."""
    reason: str

    def __str__(self) -> str:
        return f"archive {self.file} ({self.by}): {self.reason}"


@dataclass(frozen=True)
class LinkProblem:
    """A message or reply between agents whose claimed row hash is not the hash of the row it
    names on the other agent's run (that row was rewritten, or the message forged)."""

    where: str
    """Where the claim is recorded ("agent B version 4")."""
    names: str
    """The row it names ("agent A run 2 version 5")."""
    claimed: str
    found: str | None
    """The hash stored there (None: no such row)."""

    def __str__(self) -> str:
        found = "no such row" if self.found is None else f"the row has {self.found}"
        return f"{self.where} claims {self.names} has hash {self.claimed}, but {found}"


@dataclass
class VerifyReport:
    streams: int = 0
    events: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)
    mismatches: list[HeadMismatch] = field(default_factory=list)
    """Streams that differ from their committed heads (``events.heads``)."""
    sealed_runs: int = 0
    """Runs checked against their RunSealed."""
    anchor: str | None = None
    """The anchor the streams were checked against, if any."""
    unreadable: list[str] = field(default_factory=list)
    """Agents whose stream does not decode, so their runs were not checked against seals."""
    archives: int = 0
    """Archive files checked against their ArchiveSealed."""
    archived_runs: int = 0
    """Runs read from those files (their chains are in ``streams`` and ``events``)."""
    archive_problems: list[ArchiveProblem] = field(default_factory=list)
    links: int = 0
    """Links between agents checked (a message's sender row, a reply's run end)."""
    link_problems: list[LinkProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.breaks
            and not self.mismatches
            and not self.archive_problems
            and not self.link_problems
        )


def verify_rows(rows: Iterable[Row]) -> VerifyReport:
    """Check rows ordered by (stream, version); report the first break of each stream."""
    report = VerifyReport()
    current: UUID | None = None
    expected_prev = GENESIS_HASH
    broken = False
    for stream, version, topic, state, position, prev_hash, stored_hash in rows:
        if stream != current:
            current, expected_prev, broken = stream, GENESIS_HASH, False
            report.streams += 1
        report.events += 1
        if broken:
            continue
        reason = None
        if bytes(prev_hash) != expected_prev:
            reason = (
                "prev_hash does not match the previous event "
                "(an event before it was altered, removed or reordered)"
            )
        elif row_hash(expected_prev, stream, version, topic, bytes(state)) != bytes(stored_hash):
            reason = "content does not match its hash (this event was altered)"
        if reason:
            report.breaks.append(ChainBreak(stream, version, position, reason))
            broken = True
        expected_prev = bytes(stored_hash)
    return report


def select_rows(
    database_url: str, streams: Sequence[UUID] | None = None, table: str = "ledger_events"
) -> Iterator[Row]:
    """The stored rows with their hashes, streamed: every stream ordered by id, or ``streams``
    in the order given; each stream by version."""
    order = "originator_id" if streams is None else "array_position(%s::uuid[], originator_id)"
    query = sql.SQL(
        "SELECT originator_id, originator_version, topic, state, notification_id, prev_hash, hash "
        "FROM {table} {where} ORDER BY {order}, originator_version"
    ).format(
        table=sql.Identifier(table),
        where=sql.SQL("WHERE originator_id = ANY(%s)" if streams is not None else ""),
        order=sql.SQL(order),
    )
    with psycopg.connect(database_url) as conn, conn.cursor(name="owlclaw_chain") as cur:
        cur.itersize = 5000
        cur.execute(query, (list(streams), list(streams)) if streams is not None else None)
        for stream, version, topic, state, position, prev_hash, hash_ in cur:
            yield stream, version, topic, bytes(state), position, bytes(prev_hash), bytes(hash_)


def verify_ledger(
    database_url: str, streams: Sequence[UUID] | None = None, table: str = "ledger_events"
) -> VerifyReport:
    """Verify every stream (or the given ones) of the ledger table, streaming the rows."""
    return verify_rows(select_rows(database_url, streams, table))
