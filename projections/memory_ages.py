"""The memory age policy: archive memories not recalled for ``archive_after_days``, delete
archived ones ``delete_after_days`` after they were archived (``[memory]``; 0 turns a step off).

A pass reads the memory view (each memory's last use: when it was remembered or last recalled,
as the view derives it from the ledger) and records what is due on each agent's stream:
MemoryArchived (with ``age_days``) and MemoryExpired, whose memories' data keys are
destroyed as ``owlclaw erase`` destroys them. Archived memories are not recalled, so nothing
revives one; remembering the same text again makes a new memory.

Idempotent across processes: a pass appends with the agent's version as loaded (the ledger's
optimistic concurrency), and leaves an agent alone while the view has not absorbed its latest
memory events, so two passes never archive or delete one memory twice.

Expired memories' keys are destroyed before MemoryExpired is appended: a pass that dies in
between, or loses the append to another writer, leaves them due, and the next pass records the
deletion (destroying the keys again is a no-op). The other order could record a deletion whose
content stays readable.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from events import catalog as ev
from events.agent import Agent
from events.erasure import memory_keys
from events.errors import StreamConflict
from events.ledger import Ledger
from projections.memory import MemoryAge, MemoryView
from projections.recall import MemoryStore

BY = "memory age policy"
"""Who destroys an expired memory's key (the ``ledger_keys`` row says so)."""
MEMORY_CHANGES: tuple[type[ev.LedgerEvent], ...] = (
    ev.MemoryArchived,
    ev.MemoryExpired,
    ev.MemoryForgotten,
    ev.DataErased,
)
"""Agent-stream events that change which memories are active or archived."""

WAIT_S = 10.0
"""How long a pass waits for the memory view to absorb what was committed before it."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgePolicy:
    archive_after_days: int = 90
    delete_after_days: int = 365

    def __post_init__(self) -> None:
        for name in ("archive_after_days", "delete_after_days"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (off) or a number of days, not negative")

    @property
    def off(self) -> bool:
        return not self.archive_after_days and not self.delete_after_days


@dataclass(frozen=True)
class Due:
    """One agent's memories the policy archives and deletes now."""

    archive: list[UUID]
    delete: list[UUID]


def due(memories: Iterable[MemoryAge], now: datetime, policy: AgePolicy) -> Due:
    """The memories to archive (active, unused for ``archive_after_days``) and to delete
    (archived ``delete_after_days`` ago or longer) as of ``now``."""
    archive, delete = [], []
    archive_age = timedelta(days=policy.archive_after_days)
    delete_age = timedelta(days=policy.delete_after_days)
    for m in memories:
        if m.archived_at is None:
            if policy.archive_after_days and now - m.last_used >= archive_age:
                archive.append(m.memory_id)
        elif policy.delete_after_days and now - m.archived_at >= delete_age:
            delete.append(m.memory_id)
    return Due(archive, delete)


@dataclass(frozen=True)
class Applied:
    """What one agent's pass recorded."""

    agent_id: str
    archived: list[UUID]
    deleted: list[UUID]


def apply_age_policy(
    view: MemoryView,
    policy: AgePolicy,
    now: datetime,
    agents: Collection[str] | None = None,
    *,
    wait_s: float = WAIT_S,
) -> list[Applied]:
    """Record on each agent's stream (of ``agents``; None: every agent) the archives and
    deletions due as of ``now``, then erase the deleted memories' content; what was recorded.

    The view must first absorb everything committed so far (waiting at most ``wait_s``), so
    that no recall recorded before the pass is missed (after a restart, the view catches up);
    otherwise the pass does nothing. An agent another writer changed meanwhile is left for the
    next pass."""
    if policy.off:
        return []
    target = view.ledger.log.last_committed()
    if not MemoryStore(view).wait_for(target, wait_s):
        log.info("memory ages: the memory view is behind log position %d: no pass", target)
        return []
    return _apply(view, policy, now, agents)


def _apply(
    view: MemoryView, policy: AgePolicy, now: datetime, agents: Collection[str] | None
) -> list[Applied]:
    ledger = view.ledger
    position = view.max_tracking_id(view.tracking_name) or 0
    by_agent: dict[str, list[MemoryAge]] = {}
    for m in view.memory_ages():
        if agents is not None and m.agent_id not in agents:
            continue
        by_agent.setdefault(m.agent_id, []).append(m)
    pending = {
        agent_id: d
        for agent_id, memories in by_agent.items()
        if (d := due(memories, now, policy)).archive or d.delete
    }
    loaded = {agent_id: ledger.load_agent(agent_id) for agent_id in pending}
    changed = _changed_after(ledger, position)  # read after loading: see the module's doc
    applied = []
    for agent_id, d in pending.items():
        agent = loaded[agent_id]
        if agent.id in changed:
            log.info("memory ages: %s left for the next pass (the view is behind it)", agent_id)
            continue
        done = _record(ledger, agent, d, policy)
        if done is not None:
            applied.append(done)
    return applied


def _changed_after(ledger: Ledger, position: int) -> set[UUID]:
    """The agent streams with memory changes after log ``position``."""
    streams: set[UUID] = set()
    while page := ledger.log.read(after=position, types=MEMORY_CHANGES):
        streams |= {logged.event.originator_id for logged in page}
        position = page[-1].position
    return streams


def _record(ledger: Ledger, agent: Agent, d: Due, policy: AgePolicy) -> Applied | None:
    if d.archive:
        agent.record(
            ev.MemoryArchived,
            memory_ids=d.archive,
            reason=f"not recalled for {policy.archive_after_days} days",
            age_days=policy.archive_after_days,
        )
    keys = memory_keys(ledger, d.delete)
    reason = f"archived {policy.delete_after_days} days ago"
    if keys:  # destroyed before the deletion is recorded: see the module's doc
        ledger.sealer.keys.destroy(keys, BY, reason)
    if d.delete:
        agent.record(
            ev.MemoryExpired,
            memory_ids=d.delete,
            reason=reason,
            age_days=policy.delete_after_days,
            keys=keys,
        )
    try:
        ledger.append(agent)
    except StreamConflict as e:
        log.info("memory ages: %s left for the next pass: %s", agent.agent_id, e)
        return None
    return Applied(agent.agent_id, list(d.archive), list(d.delete))
