"""A page of an agent's ledger as ``owlclaw ledger`` shows it: its events in log order, each
with its run's number, and its sub-agents' tree. The CLI reads it without a server; a running
server reads it for the CLI (``GET /agents/{id}/ledger``)."""

from __future__ import annotations

import msgspec

from events import Ledger
from events.catalog import event_fields
from owlclaw.reports.listings import LedgerPage, LoggedRow
from owlclaw.tools.subagents import spawn_tree


def ledger_page(led: Ledger, agent_id: str, after: int, limit: int | None) -> LedgerPage:
    """The first ``limit`` events after log position ``after`` (None: every one); UnknownAgent
    when there is no such agent."""
    history = led.agent_history(agent_id, after, None if limit is None else limit + 1)
    tree = spawn_tree(led, agent_id)
    runs = {run_id: n for n, run_id in enumerate(led.load_agent(agent_id).run_ids(), 1)}
    more = limit is not None and len(history) > limit
    if more:
        history = history[:limit]
    rows = [
        LoggedRow(
            position=h.position,
            stream=h.event.originator_id,
            version=h.event.originator_version,
            type=type(h.event).__name__,
            timestamp=h.event.timestamp,
            data=msgspec.to_builtins(event_fields(h.event)),
            run=None if h.event.stream == "agent" else runs[h.event.originator_id],
        )
        for h in history
    ]
    return LedgerPage(agent_id, rows, history[-1].position if more else None, tree)
