"""Why an agent knows something (``owlclaw why AGENT QUERY``): the memories recall finds for a
query, each walked back to where it came from — its run, the step, the model response whose
``remember`` call recorded it — with the run's hash chain verified up to that event.

The chain is recomputed from the run's rows as stored (``ledger.chains.chain_rows``: in the
ledger table, or in its archive file once archived), as ``owlclaw verify`` recomputes it: a break
at or before the memory's event means the path cannot be trusted.
The event's stored hash is also compared with the one the memory view kept when it projected the
memory, so a rewrite with its hashes recomputed since then shows too. The walk reads the run's
stream itself, so a memory the view holds no provenance for (projected before it kept one) is
still traced; only that comparison is missing then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from events import Ledger, LedgerReadError
from events import catalog as ev
from events.hashchain import Row, verify_rows
from owlclaw.config import OwlClawConfig
from owlclaw.reports.inspection import bring_up_to_date
from projections import MemoryStore, MemoryView
from projections.provenance import remembered_steps
from projections.relevance import Memory

EXCERPT_CHARS = 300
"""A model response is cut here."""


@dataclass(frozen=True)
class Response:
    """The model response whose ``remember`` call recorded a memory."""

    version: int
    """Its LLMResponded's version in the run stream."""
    model: str
    excerpt: str
    """What the model said and the ``remember`` call it made, cut to ``EXCERPT_CHARS``."""


@dataclass(frozen=True)
class Chain:
    """The run stream's hash chain up to the memory's event."""

    verified: bool
    checked: int
    """Events of the run verified (those up to the memory's event)."""
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Trail:
    """One recalled memory and the path back to where it came from."""

    memory: Memory
    run_id: UUID
    run_no: int
    """0: the run's stream has no RunStarted (or could not be read)."""
    step: int
    """The step-th model response of the run (``owlclaw explain AGENT RUN STEP``); 0: none."""
    call_id: str
    version: int
    """The MemoryRemembered's version in the run stream (0: not found there)."""
    event_hash: str
    """Its hash as stored now (hex; "" when it is not stored)."""
    response: Response | None
    chain: Chain


@dataclass(frozen=True)
class Why:
    agent_id: str
    query: str
    trails: list[Trail]
    warning: str | None
    """Set when the memory view was behind or recall degraded: the memories may be incomplete."""

    @property
    def verified(self) -> bool:
        return all(t.chain.verified for t in self.trails)


def why(
    led: Ledger, view: MemoryView, config: OwlClawConfig, agent_id: str, query: str, limit: int
) -> Why:
    """Recall ``query`` as the ``recall`` tool ranks it (the view brought up to date first) and
    walk each memory found back to its run and model response. UnknownAgent if there is no
    such agent."""
    led.load_agent(agent_id)
    behind = bring_up_to_date(led, view)
    store = MemoryStore(view, half_life_days=config.memory.half_life_days)
    found = store.recall(
        agent_id, query, limit=limit, min_similarity=config.runtime.recall_min_similarity
    )
    warning = "; ".join(w for w in (behind, found.warning) if w) or None
    return Why(agent_id, query, [walk(led, m) for m in found.memories], warning)


def walk(led: Ledger, memory: Memory) -> Trail:
    """From a recalled memory to its run, step and model response, the chain verified."""
    assert memory.source is not None, "recall sets every memory's source"
    source = memory.source
    run_id = source.run_id
    problems: list[str] = []
    try:
        run = led.stream(run_id)
    except LedgerReadError as e:
        problems.append(f"the run's stream cannot be read: {e}")
        run = []
    remembered = next(
        (e for e in run if isinstance(e, ev.MemoryRemembered) and e.memory_id == memory.memory_id),
        None,
    )
    version = remembered.originator_version if remembered is not None else source.version
    if remembered is None and run:
        problems.append(f"the run's stream has no MemoryRemembered of memory {memory.memory_id}")
    step = remembered_steps(run, [(version, memory.memory_id)])[memory.memory_id]
    rows = list(led.chains.chain_rows([run_id]))  # an archived run's from its archive
    stored = next((bytes(r[6]) for r in rows if r[1] == version), None)
    chain = _chain(rows, version, stored, source.event_hash, problems)
    return Trail(
        memory=memory,
        run_id=run_id,
        run_no=step.run_no or source.run_no,
        step=step.step,
        call_id=step.call_id,
        version=version,
        event_hash=stored.hex() if stored is not None else "",
        response=_response(run, step.step, step.call_id),
        chain=chain,
    )


def _chain(
    rows: list[Row],
    version: int,
    stored: bytes | None,
    projected: str,
    problems: list[str],
) -> Chain:
    """The run's chain recomputed up to ``version`` (a break after it is not this memory's),
    and the event's stored hash against the one the view kept (``projected``, "" if none)."""
    report = verify_rows(rows)
    problems += [str(b) for b in report.breaks if b.version <= version]
    if stored is None:
        problems.append(f"the run's stream has no event at version {version}")
    elif projected and stored.hex() != projected:
        problems.append(
            f"the event at version {version} is not the one the memory was projected from:"
            f" its hash was {projected}, it is {stored.hex()} (rewritten, hashes recomputed)"
        )
    return Chain(verified=not problems, checked=min(version, report.events), problems=problems)


def _response(run: list[ev.LedgerEvent], step: int, call_id: str) -> Response | None:
    """The step-th model response of the run, with the ``remember`` call ``call_id``."""
    responses = [e for e in run if isinstance(e, ev.LLMResponded)]
    if not 0 < step <= len(responses):
        return None
    response = responses[step - 1]
    message: dict[str, Any] = response.message
    said = message.get("content")
    calls = [
        f"{c['function']['name']}({c['function'].get('arguments', '')})"
        for c in message.get("tool_calls") or []
        if not call_id or c.get("id") == call_id
    ]
    excerpt = " ".join([*([repr(said)] if said else []), *calls])
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[: EXCERPT_CHARS - 1] + "…"
    return Response(response.originator_version, response.model, excerpt)
