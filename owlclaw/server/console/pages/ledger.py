"""The ledger page: an agent's events in log order (its stream and its runs'), a page at a time,
with each stream's hash-chain status, the first broken event of each broken stream and the
streams that differ from their sealed or anchored heads, as ``owlclaw ledger`` and ``owlclaw
verify`` read them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aiohttp import web

from events import Ledger, LedgerReadError
from events.catalog import event_fields
from events.hashchain import ChainBreak, HeadMismatch
from events.ledger_log import LoggedEvent
from events.streams import agent_stream_id
from owlclaw.audit.chains import agent_streams, verify_agent
from owlclaw.server.console.render import render
from owlclaw.server.console.steps import text
from owlclaw.server.service import Service

PAGE_EVENTS = 100


@dataclass(frozen=True)
class StreamStatus:
    stream: UUID
    label: str
    """"agent", or "run N"."""
    broken: ChainBreak | None
    mismatch: HeadMismatch | None
    """The stream no longer ends where its seal or the latest anchor says."""


def _read(ledger: Ledger, agent_id: str) -> dict[str, Any]:
    """The agent's history and its streams' chain status; a history that cannot be decoded
    is named (the chains are checked on the stored rows all the same)."""
    unreadable = None
    try:
        streams = agent_streams(ledger, agent_id)
        report = verify_agent(ledger, agent_id)
    except LedgerReadError as e:  # its own stream does not decode: check that one
        streams, unreadable = [agent_stream_id(agent_id)], str(e)
        report = ledger.chains.verify(streams)
    breaks = {b.stream: b for b in report.breaks}
    mismatches = {m.stream: m for m in report.mismatches}
    statuses = [
        StreamStatus(s, "agent" if i == 0 else f"run {i}", breaks.get(s), mismatches.get(s))
        for i, s in enumerate(streams)
    ]
    history: list[LoggedEvent] = []
    if unreadable is None:
        try:
            history = ledger.agent_history(agent_id)
        except LedgerReadError as e:
            unreadable = str(e)
    return {"report": report, "streams": statuses, "history": history, "unreadable": unreadable}


def routes(service: Service) -> list[web.RouteDef]:
    async def ledger(request: web.Request) -> web.Response:
        agent_id = request.match_info["agent_id"]
        service.served(agent_id)
        assert service.ledger is not None
        read = await asyncio.to_thread(_read, service.ledger, agent_id)
        history: list[LoggedEvent] = read.pop("history")
        pages = max(1, -(-len(history) // PAGE_EVENTS))
        asked = request.query.get("page", "")
        page = min(int(asked), pages) if asked.isdigit() and int(asked) > 0 else pages
        shown = history[(page - 1) * PAGE_EVENTS : page * PAGE_EVENTS]
        broken = {(b.stream, b.version): b for b in read["report"].breaks}
        labels = {s.stream: s.label for s in read["streams"]}
        rows = [
            {
                "position": h.position,
                "stream": h.event.originator_id,
                "label": labels.get(h.event.originator_id, "?"),
                "version": h.event.originator_version,
                "type": type(h.event).__name__,
                "at": h.event.timestamp,
                "data": text(event_fields(h.event)),
                "broken": broken.get((h.event.originator_id, h.event.originator_version)),
            }
            for h in shown
        ]
        return render(
            request,
            "ledger.html",
            agent=agent_id,
            rows=rows,
            page=page,
            pages=pages,
            total=len(history),
            **read,
        )

    return [web.get("/ledger/{agent_id}", ledger)]
