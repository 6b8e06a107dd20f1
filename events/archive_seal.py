"""What an ArchiveSealed commits to, and whether an archive file still holds exactly that.

The seal names the file and its sha256, and the head (last version and row hash) of every run
it holds, with a Merkle root over those heads. Checking a file against its seal recomputes each
run's hash chain from the file's rows (a changed byte, a dropped or reordered event breaks it
at that event), compares each run's head with the sealed one (a dropped last event, a run
added or left out) and the file's bytes with the sealed sha256. Pure functions of the rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from events import catalog as ev
from events.hashchain import ArchiveProblem, ChainBreak, Row, VerifyReport, verify_rows

Heads = dict[UUID, tuple[int, bytes]]


def leaf(run: ev.ArchivedRun) -> bytes:
    """The Merkle leaf of one archived run: sha256 of 0x00 ‖ ``run_id:version:hash``."""
    return hashlib.sha256(b"\x00" + f"{run.run_id}:{run.version}:{run.hash}".encode()).digest()


def merkle_root(runs: Sequence[ev.ArchivedRun]) -> str:
    """The Merkle root (hex) over the runs' leaves in the given order: each level pairs
    neighbours as sha256(0x01 ‖ left ‖ right), an odd last node goes up as it is; the root of
    no runs is sha256 of nothing."""
    level = [leaf(r) for r in runs]
    if not level:
        return hashlib.sha256(b"").hexdigest()
    while len(level) > 1:
        paired = [
            hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        level = paired + ([level[-1]] if len(level) % 2 else [])
    return level[0].hex()


def stream_heads(rows: Sequence[Row]) -> Heads:
    """Stream -> (version, hash) of its last row in ``rows``."""
    return {stream: (version, bytes(hash_)) for stream, version, _, _, _, _, hash_ in rows}


def archived_runs(rows: Sequence[Row], run_nos: Mapping[UUID, int]) -> list[ev.ArchivedRun]:
    """The head of each run in ``rows`` (grouped by run), in the order they appear."""
    return [
        ev.ArchivedRun(run_id=stream, run_no=run_nos[stream], version=version, hash=hash_.hex())
        for stream, (version, hash_) in stream_heads(rows).items()
    ]


@dataclass
class ArchiveCheck:
    """One archive file against its seal: the problems, its rows' chains, and the heads and
    hashes it holds (for the checks of runs against their RunSealed and of anchors)."""

    problems: list[ArchiveProblem] = field(default_factory=list)
    chains: VerifyReport = field(default_factory=VerifyReport)
    heads: Heads = field(default_factory=dict)
    hashes: dict[tuple[UUID, int], bytes] = field(default_factory=dict)


def check_archive(
    seal: ev.ArchiveSealed, by: str, digest: str, rows: Sequence[Row], labels: Mapping[UUID, str]
) -> ArchiveCheck:
    """How the file (its sha256 ``digest`` and ``rows``) differs from ``seal``, committed ``by``
    (its place on the agent's stream); ``labels`` name the runs ("agent A run N")."""
    check = ArchiveCheck(heads=stream_heads(rows))
    check.hashes = {(r[0], r[1]): bytes(r[6]) for r in rows}

    def problem(reason: str) -> None:
        check.problems.append(ArchiveProblem(seal.file, by, reason))

    if digest != seal.sha256:
        problem(f"its bytes changed: sha256 {digest}, sealed {seal.sha256}")
    if merkle_root(seal.runs) != seal.root:
        problem(f"the sealed runs do not make the sealed root {seal.root}")
    chains = verify_rows(rows)
    chains.breaks = [
        ChainBreak(
            b.stream,
            b.version,
            b.position,
            f"in archive {seal.file} ({labels.get(b.stream, 'a run')}): {b.reason}",
        )
        for b in chains.breaks
    ]
    check.chains = chains
    sealed = {r.run_id: r for r in seal.runs}
    for run in seal.runs:
        label = labels.get(run.run_id, f"run {run.run_no}")
        head = check.heads.get(run.run_id)
        if head is None:
            problem(f"{label} (stream {run.run_id}) is not in the file")
        elif head[0] != run.version:
            problem(
                f"{label} ends at version {head[0]} in the file, sealed at version "
                f"{run.version}: events were dropped or added"
            )
        elif head[1].hex() != run.hash:
            problem(
                f"{label}'s last event (version {run.version}) has hash {head[1].hex()} in "
                f"the file, sealed {run.hash}: it was rewritten"
            )
    for stream in check.heads.keys() - sealed.keys():
        problem(f"stream {stream} is in the file but not among its sealed runs")
    return check
