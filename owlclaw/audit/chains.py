"""An agent's streams and whether they are intact (``owlclaw verify``, the console's ledger
page): hash chains recomputed, runs checked against the heads sealed on the agent's stream, and
every stream against the latest anchor (or an anchor kept outside). Archived runs are checked
in their files against the ArchiveSealed that accounts for them, and their heads there stand in
for the rows the archiving deleted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from events import Ledger, LedgerReadError
from events import catalog as ev
from events.archive_file import ArchiveUnreadable, file_sha256, read_archive
from events.archive_seal import check_archive
from events.hashchain import ArchiveProblem, HeadMismatch, VerifyReport
from events.heads import ANCHOR_STREAM_ID, Anchor, check_anchor, check_seals
from events.streams import agent_stream_id
from owlclaw.audit.conversations import check_links

Heads = dict[UUID, tuple[int, bytes]]
Hashes = dict[tuple[UUID, int], bytes]


def agent_streams(ledger: Ledger, agent_id: str) -> list[UUID]:
    """The agent's own stream, then its runs' streams in run order (UnknownAgent if none)."""
    agent = ledger.load_agent(agent_id)
    return [agent.id, *agent.run_ids()]


def verify_agent(
    ledger: Ledger, agent_id: str | None = None, anchor: Anchor | None = None
) -> VerifyReport:
    """Verify the agent's streams (every stream without one): their hash chains; each run
    against its RunSealed and each queued run's stream present (``events.heads.check_seals``);
    each message or reply from another agent against the row it names
    (``conversations.check_links``); each stream against ``anchor`` (one kept outside), by
    default the ledger's latest."""
    agent_ids = ledger.agent_ids() if agent_id is None else [agent_id]
    streams = None if agent_id is None else agent_streams(ledger, agent_id)
    report = ledger.chains.verify(streams)
    if anchor is not None:
        by = f"anchor {anchor.anchor} kept outside, digest {anchor.digest}"
    else:
        anchor = ledger.chains.latest_anchor()
        by = "" if anchor is None else f"anchor {anchor.anchor} in the ledger"
    labels: dict[UUID, str] = {}
    archived_heads: Heads = {}
    archived_hashes: Hashes = {}
    for aid in agent_ids:
        labels[agent_stream_id(aid)] = f"agent {aid}"
        try:
            own = ledger.stream(agent_stream_id(aid))
        except LedgerReadError as e:  # its chain break (if any) is in the report already
            report.unreadable.append(f"agent {aid}: runs not checked against their seals: {e}")
            continue
        runs = {e.run_id: e.run_no for e in own if isinstance(e, ev.RunQueued | ev.RunSealed)}
        labels.update({r: f"agent {aid} run {n}" for r, n in runs.items()})
        heads, hashes = _archives(ledger, aid, own, labels, report)
        archived_heads.update(heads)
        archived_hashes.update(hashes)
        seals = [(e.run_id, e.version) for e in own if isinstance(e, ev.RunSealed)]
        found, checked = check_seals(
            aid,
            own,
            {**heads, **ledger.chains.stream_heads(list(runs))},
            {**hashes, **ledger.chains.event_hashes(seals)},
        )
        report.mismatches += found
        report.sealed_runs += checked
    report.links, report.link_problems = check_links(ledger, agent_ids)
    if anchor is not None:
        report.mismatches += _against_anchor(
            ledger, anchor, streams, labels, by, (archived_heads, archived_hashes)
        )
        report.anchor = by
    return report


def _archives(
    ledger: Ledger,
    agent_id: str,
    own: Sequence[ev.LedgerEvent],
    labels: Mapping[UUID, str],
    report: VerifyReport,
) -> tuple[Heads, Hashes]:
    """Check each archive file of the agent against its ArchiveSealed, adding its problems and
    its rows' chains to ``report``; the heads and hashes of the runs it holds. A file that
    cannot be read is one problem naming its runs, whose sealed heads then stand in for them
    (so they are not reported missing a second time)."""
    heads: Heads = {}
    hashes: Hashes = {}
    for seal in (e for e in own if isinstance(e, ev.ArchiveSealed)):
        by = f"ArchiveSealed at agent {agent_id} version {seal.originator_version}"
        report.archives += 1
        try:
            path = ledger.archive.path(seal)
            _, rows = read_archive(path)
            digest = file_sha256(path)
        except ArchiveUnreadable as e:
            runs = ", ".join(str(r.run_no) for r in seal.runs)
            report.archive_problems.append(
                ArchiveProblem(seal.file, by, f"{e}; it holds run(s) {runs}, now unaccounted for")
            )
            for r in seal.runs:
                heads[r.run_id] = (r.version, bytes.fromhex(r.hash))
                hashes[(r.run_id, r.version)] = bytes.fromhex(r.hash)
            continue
        check = check_archive(seal, by, digest, rows, labels)
        report.archive_problems += check.problems
        report.breaks += check.chains.breaks
        report.streams += check.chains.streams
        report.events += check.chains.events
        report.archived_runs += len(check.heads)
        heads.update(check.heads)
        hashes.update(check.hashes)
    return heads, hashes


def _against_anchor(
    ledger: Ledger,
    anchor: Anchor,
    streams: Sequence[UUID] | None,
    labels: Mapping[UUID, str],
    by: str,
    archived: tuple[Heads, Hashes],
) -> list[HeadMismatch]:
    wanted = None if streams is None else set(streams)
    anchored = [
        h
        for h in anchor.heads
        if h.stream != ANCHOR_STREAM_ID and (wanted is None or h.stream in wanted)
    ]
    ids = [h.stream for h in anchored]
    heads = {**archived[0], **ledger.chains.stream_heads(ids)}
    hashes = {
        **archived[1],
        **ledger.chains.event_hashes([(h.stream, h.version) for h in anchored]),
    }
    return check_anchor(anchored, heads, hashes, labels, by)
