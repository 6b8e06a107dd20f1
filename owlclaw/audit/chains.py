"""An agent's streams and whether they are intact (``owlclaw verify``, the console's ledger
page): hash chains recomputed, runs checked against the heads sealed on the agent's stream, and
every stream against the latest anchor (or an anchor kept outside)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from events import Ledger, LedgerReadError
from events import catalog as ev
from events.hashchain import HeadMismatch, VerifyReport
from events.heads import ANCHOR_STREAM_ID, Anchor, check_anchor, check_seals
from events.streams import agent_stream_id


def agent_streams(ledger: Ledger, agent_id: str) -> list[UUID]:
    """The agent's own stream, then its runs' streams in run order (UnknownAgent if none)."""
    agent = ledger.load_agent(agent_id)
    return [agent.id, *agent.run_ids()]


def verify_agent(
    ledger: Ledger, agent_id: str | None = None, anchor: Anchor | None = None
) -> VerifyReport:
    """Verify the agent's streams (every stream without one): their hash chains; each run
    against its RunSealed and each queued run's stream present (``events.heads.check_seals``);
    each stream against ``anchor`` (one kept outside), by default the ledger's latest."""
    agent_ids = ledger.agent_ids() if agent_id is None else [agent_id]
    streams = None if agent_id is None else agent_streams(ledger, agent_id)
    report = ledger.chains.verify(streams)
    if anchor is not None:
        by = f"anchor {anchor.anchor} kept outside, digest {anchor.digest}"
    else:
        anchor = ledger.chains.latest_anchor()
        by = "" if anchor is None else f"anchor {anchor.anchor} in the ledger"
    labels: dict[UUID, str] = {}
    for aid in agent_ids:
        labels[agent_stream_id(aid)] = f"agent {aid}"
        try:
            own = ledger.stream(agent_stream_id(aid))
        except LedgerReadError as e:  # its chain break (if any) is in the report already
            report.unreadable.append(f"agent {aid}: runs not checked against their seals: {e}")
            continue
        runs = {e.run_id: e.run_no for e in own if isinstance(e, ev.RunQueued | ev.RunSealed)}
        labels.update({r: f"agent {aid} run {n}" for r, n in runs.items()})
        seals = [(e.run_id, e.version) for e in own if isinstance(e, ev.RunSealed)]
        found, checked = check_seals(
            aid, own, ledger.chains.stream_heads(list(runs)), ledger.chains.event_hashes(seals)
        )
        report.mismatches += found
        report.sealed_runs += checked
    if anchor is not None:
        report.mismatches += _against_anchor(ledger, anchor, streams, labels, by)
        report.anchor = by
    return report


def _against_anchor(
    ledger: Ledger,
    anchor: Anchor,
    streams: Sequence[UUID] | None,
    labels: Mapping[UUID, str],
    by: str,
) -> list[HeadMismatch]:
    wanted = None if streams is None else set(streams)
    anchored = [
        h
        for h in anchor.heads
        if h.stream != ANCHOR_STREAM_ID and (wanted is None or h.stream in wanted)
    ]
    ids = [h.stream for h in anchored]
    heads = ledger.chains.stream_heads(ids)
    hashes = ledger.chains.event_hashes([(h.stream, h.version) for h in anchored])
    return check_anchor(anchored, heads, hashes, labels, by)
