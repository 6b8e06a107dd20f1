"""Stream heads committed where a deleter cannot silently change them, and the streams that
no longer match them.

A hash chain only links forward: deleting a stream's last events, or the whole stream, leaves a
chain that still holds. So heads are committed elsewhere and compared:

* a run's head (last version and hash) is sealed on its agent's stream when the run ends
  (``RunSealed``, in the same transaction), and the agent's stream is itself hash-chained;
* ``owlclaw anchor`` records every stream's head as one ``ChainsAnchored`` on the anchor
  stream, and prints it for the operator to keep outside the database.

Everything here is a pure function of what the ledger holds, so it is tested without one. That
includes a run's head as this process knows it after its own commits (``chain_runs``), which
lets a run be sealed without reading its stream back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid5

import msgspec
from eventsourcing.persistence import StoredEvent

from events import catalog as ev
from events.agent import Agent
from events.hashchain import GENESIS_HASH, HeadMismatch, row_hash
from events.run import Run

ANCHOR_STREAM_ID = uuid5(NAMESPACE_URL, "https://owlclaw.dev/anchors")
"""The one stream of ``ChainsAnchored`` events."""

Heads = Mapping[UUID, tuple[int, bytes]]
"""Stream -> (last version, its row hash), as stored now."""


def anchor_digest(heads: Sequence[ev.StreamHead]) -> str:
    """sha256 (hex) of the lines ``<stream>:<version>:<hash>\\n``, in the given order."""
    lines = "".join(f"{h.stream}:{h.version}:{h.hash}\n" for h in heads)
    return hashlib.sha256(lines.encode()).hexdigest()


class Anchor(msgspec.Struct, frozen=True, kw_only=True):
    """An anchor as ``owlclaw anchor --json`` prints it, for the operator to keep outside:
    its number (version on the anchor stream), its time, the digest and the heads."""

    anchor: int
    at: datetime
    digest: str
    heads: list[ev.StreamHead]

    @classmethod
    def of(cls, event: ev.ChainsAnchored) -> Anchor:
        return cls(
            anchor=event.originator_version,
            at=event.timestamp,
            digest=event.digest,
            heads=event.heads,
        )


class AnchorInvalid(ValueError):
    """An anchor file that is not one ``owlclaw anchor --json`` printed, or was edited."""


def read_anchor(data: bytes, source: str) -> Anchor:
    """The anchor in ``data`` (read from ``source``); AnchorInvalid saying what is wrong when
    it does not decode or its digest does not match its heads (the file was edited)."""
    try:
        anchor = msgspec.json.decode(data, type=Anchor)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise AnchorInvalid(
            f"{source} is not an anchor printed by `owlclaw anchor --json`: {e}"
        ) from e
    if anchor_digest(anchor.heads) != anchor.digest:
        raise AnchorInvalid(
            f"{source}: its digest {anchor.digest} does not match its heads "
            f"({anchor_digest(anchor.heads)}): the file was altered"
        )
    return anchor


def anchored_heads(heads: Heads) -> list[ev.StreamHead]:
    """The heads to anchor: every stream but the anchor stream, sorted by stream id."""
    return [
        ev.StreamHead(stream=s, version=v, hash=h.hex())
        for s, (v, h) in sorted(heads.items())
        if s != ANCHOR_STREAM_ID
    ]


def _mismatch(
    stream: UUID,
    label: str,
    expected: tuple[int, str],
    head: tuple[int, bytes] | None,
    at_expected: bytes | None,
    by: str,
) -> HeadMismatch | None:
    """How ``stream`` falls short of the head ``expected`` (version, hex hash) committed ``by``
    a seal or an anchor, or None. ``head``: its last event now; ``at_expected``: the hash now
    stored at the expected version."""
    version, hash_ = expected
    if head is None:
        reason = "the stream is missing (deleted)"
    elif head[0] < version:
        reason = f"the stream ends {version - head[0]} event(s) short: its tail was deleted"
    elif at_expected is not None and at_expected.hex() != hash_:
        reason = (
            f"the event at version {version} is not the one committed: it was rewritten "
            "(with its hashes recomputed)"
        )
    else:
        return None
    found_version = None if head is None else head[0]
    return HeadMismatch(
        stream, label, version, hash_, found_version, _hex(at_expected), by=by, reason=reason
    )


def check_seals(
    agent_id: str,
    agent_stream: Sequence[ev.LedgerEvent],
    heads: Heads,
    hashes: Mapping[tuple[UUID, int], bytes],
) -> tuple[list[HeadMismatch], int]:
    """Cross-check an agent's runs with its stream: every sealed run ends exactly at its sealed
    version and hash (no tail deleted, no event appended after its end, stream present), and
    every queued run that later runs overtook has its stream (runs start in queue order, so
    only the latest queued runs may not have started yet). ``heads`` and ``hashes`` (at each
    sealed version) cover the agent's run streams. The mismatches, and how many runs were
    checked against a seal."""
    queued = {e.run_no: e.run_id for e in agent_stream if isinstance(e, ev.RunQueued)}
    seals = [e for e in agent_stream if isinstance(e, ev.RunSealed)]
    found: list[HeadMismatch] = []
    sealed = set()
    for seal in seals:
        sealed.add(seal.run_id)
        label = f"agent {agent_id} run {seal.run_no}"
        by = f"RunSealed at agent version {seal.originator_version}"
        head = heads.get(seal.run_id)
        if head is not None and head[0] > seal.version:
            found.append(
                HeadMismatch(
                    seal.run_id,
                    label,
                    seal.version,
                    seal.hash,
                    head[0],
                    _hex(hashes.get((seal.run_id, seal.version))),
                    by=by,
                    reason=f"{head[0] - seal.version} event(s) were appended after the run's end",
                )
            )
            continue
        at = hashes.get((seal.run_id, seal.version))
        if (
            m := _mismatch(seal.run_id, label, (seal.version, seal.hash), head, at, by)
        ) is not None:
            found.append(m)
    latest_started = max((n for n, r in queued.items() if r in heads), default=0)
    for run_no, run_id in sorted(queued.items()):
        if run_no < latest_started and run_id not in heads and run_id not in sealed:
            found.append(
                HeadMismatch(
                    run_id,
                    f"agent {agent_id} run {run_no}",
                    1,
                    "",
                    None,
                    None,
                    by=f"RunQueued, and run {latest_started} started after it",
                    reason="the run's stream is missing (deleted)",
                )
            )
    return found, len(sealed)


def check_anchor(
    anchored: Sequence[ev.StreamHead],
    heads: Heads,
    hashes: Mapping[tuple[UUID, int], bytes],
    labels: Mapping[UUID, str],
    by: str,
) -> list[HeadMismatch]:
    """Streams that no longer reach, or no longer agree with, their anchored head: shorter
    than the anchored version (a tail or the stream deleted after the anchor), or another hash
    at that version (an event rewritten, its chain recomputed). Streams that grew since, or
    are newer than the anchor, are fine. ``heads`` and ``hashes`` cover the anchored streams."""
    found = []
    for a in anchored:
        at = hashes.get((a.stream, a.version))
        label = labels.get(a.stream, f"stream {a.stream}")
        m = _mismatch(a.stream, label, (a.version, a.hash), heads.get(a.stream), at, by)
        if m is not None:
            found.append(m)
    return found


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def known_hash(run: Run, version: int) -> bytes | None:
    """The hash ``run``'s stream has at ``version`` as this process knows it without a read:
    genesis before its first event, or its ``head`` when it ends there."""
    if version == 0:
        return GENESIS_HASH
    if run.head is not None and run.head[0] == version:
        return run.head[1]
    return None


def chain_runs(aggregates: Sequence[Agent | Run], committed: Sequence[StoredEvent]) -> None:
    """Set each run's ``head`` to the hash its stream now ends with, chaining the committed
    events from its previous head as the SQL append did (``row_hash``); unknown (None) when
    that previous head is."""
    for run in aggregates:
        if not isinstance(run, Run):
            continue
        rows = [s for s in committed if s.originator_id == run.id]
        if not rows:
            continue
        previous = known_hash(run, rows[0].originator_version - 1)
        if previous is not None:
            for s in rows:
                previous = row_hash(previous, run.id, s.originator_version, s.topic, s.state)
            run.head = (rows[-1].originator_version, previous)
        else:
            run.head = None
