"""An agent as it was at a past moment, rebuilt from the ledger alone (never from a view).

A moment is a log position (``@1234``: every event up to it) or a time (every event recorded at
or before it). The agent's aggregate is replayed from its stream's events up to the moment, so
its identity, skills, disabled tools and active schedules are exactly what its runtime read
then; memories are those remembered by then and neither forgotten nor archived by then, and
recall ranks them with the scoring the ``recall`` tool uses (similarity x decay, the decay taken
at the moment).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.agent_state import ActiveSchedule, Approval
from events.ledger_log import LoggedEvent
from events.streams import agent_stream_id
from owlclaw.audit.manifest import IdentityVersion
from projections.embedders import Embedder
from projections.recall import MemoryStore
from projections.relevance import Memory, rank


class UnknownMoment(ValueError):
    """The text names no moment, or the agent had no events by then."""


@dataclass(frozen=True)
class Moment:
    """A cut of the log: events at or before ``position``, or recorded at or before ``at``
    (neither: every event recorded so far)."""

    position: int | None = None
    at: datetime | None = None

    def includes(self, logged: LoggedEvent) -> bool:
        if self.position is not None:
            return logged.position <= self.position
        return self.at is None or logged.event.timestamp <= self.at

    def __str__(self) -> str:
        if self.position is not None:
            return f"@{self.position}"
        return self.at.isoformat() if self.at is not None else "now"


def parse_moment(text: str) -> Moment:
    """``@1234`` (a log position) or an ISO-8601 time (UTC when it names no offset)."""
    text = text.strip()
    if text.startswith("@"):
        if not text[1:].isdigit():
            raise UnknownMoment(f"{text!r} is not a log position: write @ and a number (@1234)")
        return Moment(position=int(text[1:]))
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise UnknownMoment(
            f"{text!r} is neither an ISO-8601 time (2026-11-03T14:02:00Z) nor a log position"
            " (@1234)"
        ) from None
    return Moment(at=at if at.tzinfo is not None else at.replace(tzinfo=UTC))


@dataclass(frozen=True)
class History:
    """An agent's events (its stream and its runs' streams) up to a moment, in log order."""

    agent_id: str
    moment: Moment
    events: list[LoggedEvent]

    @property
    def position(self) -> int:
        """The last log position the moment includes."""
        return self.events[-1].position

    @property
    def at(self) -> datetime:
        """The moment's time: as given, or the time of the last event up to the position."""
        return self.moment.at or self.events[-1].event.timestamp


def history_at(led: Ledger, agent_id: str, moment: Moment) -> History:
    """The agent's events up to ``moment``; UnknownMoment when it had none yet (an unknown
    agent raises the ledger's UnknownAgent)."""
    events = [e for e in led.agent_history(agent_id) if moment.includes(e)]
    if not events:
        raise UnknownMoment(f"agent {agent_id} had recorded nothing by {moment}")
    return History(agent_id, moment, events)


def changed_files(
    before: ev.IdentityLoaded | IdentityVersion | None, after: ev.IdentityLoaded | IdentityVersion
) -> list[str]:
    """The app files that differ between two identity versions, named as in the app
    directory (a skill by its SKILL.md)."""
    files = [
        (name, getattr(before, attr, None), getattr(after, attr))
        for name, attr in (
            ("SOUL.md", "soul_sha256"),
            ("IDENTITY.md", "identity_sha256"),
            ("owlclaw.toml", "config_sha256"),
            ("handlers.py", "code_sha256"),
        )
    ]
    changed = [name for name, old, new in files if old != new and (old or new)]
    old_skills = before.skills if before is not None else {}
    for skill in sorted(old_skills.keys() | after.skills.keys()):
        if skill not in after.skills:
            changed.append(f"SKILL.md of skill {skill} (removed)")
        elif skill not in old_skills:
            changed.append(f"SKILL.md of skill {skill} (added)")
        elif old_skills[skill] != after.skills[skill]:
            changed.append(f"SKILL.md of skill {skill}")
    return changed


def identity_versions(history: Sequence[LoggedEvent]) -> list[IdentityVersion]:
    """Every identity version in ``history``, oldest first, each with what it changed."""
    versions: list[IdentityVersion] = []
    previous: ev.IdentityLoaded | None = None
    for logged in history:
        e = logged.event
        if isinstance(e, ev.IdentityLoaded):
            versions.append(
                IdentityVersion(
                    number=len(versions) + 1,
                    position=logged.position,
                    loaded_at=e.timestamp,
                    soul_sha256=e.soul_sha256,
                    identity_sha256=e.identity_sha256,
                    config_sha256=e.config_sha256,
                    code_sha256=e.code_sha256,
                    skills=dict(e.skills),
                    governance=dict(e.governance),
                    changed=changed_files(previous, e),
                )
            )
            previous = e
    return versions


@dataclass(frozen=True)
class Spend:
    """Tokens and model cost of the agent's runs on one UTC day up to a moment."""

    day: str
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class AgentAt:
    agent_id: str
    position: int
    at: datetime
    identity: IdentityVersion | None
    """The identity in effect (None: none loaded yet)."""
    runs: int
    """Runs queued by then."""
    disabled_tools: list[str]
    """Tools the operator had disabled."""
    withheld_tools: list[str]
    """Tools a sub-agent is not given."""
    schedules: dict[str, ActiveSchedule]
    pending_approvals: dict[str, Approval]
    budget_exceeded: list[dict[str, Any]]
    """The BudgetExceeded of that day up to the moment."""
    spent: Spend
    app_error: str | None = None
    """Why the app did not load, if it did not then."""


def agent_at(history: History) -> AgentAt:
    """The agent's state at the moment of ``history``: its aggregate replayed from its own
    stream's events up to then, and that day's spending summed from its runs' events."""
    agent = Agent.blank(agent_stream_id(history.agent_id))
    day = history.at.astimezone(UTC).date()
    tokens, cost = 0, 0.0
    exceeded: list[dict[str, Any]] = []
    for logged in history.events:
        e = logged.event
        if e.originator_id == agent.id:
            agent.apply(e)
        same_day = e.timestamp.astimezone(UTC).date() == day
        if isinstance(e, ev.LLMResponded) and same_day:
            tokens += e.usage.get("total_tokens", 0)
            cost += e.cost_usd
        elif isinstance(e, ev.SubAgentCharged) and same_day:
            tokens += e.tokens
            cost += e.cost_usd
        elif isinstance(e, ev.BudgetExceeded) and same_day:
            exceeded.append(ev.event_fields(e) | {"at": e.timestamp})
    versions = identity_versions(history.events)
    state = agent.state
    return AgentAt(
        agent_id=history.agent_id,
        position=history.position,
        at=history.at,
        identity=versions[-1] if versions else None,
        runs=state.run_count,
        disabled_tools=list(state.disabled_tools),
        withheld_tools=list(state.withheld_tools),
        schedules=dict(state.schedules),
        pending_approvals={k: a for k, a in state.approvals.items() if a.status == "pending"},
        budget_exceeded=exceeded,
        spent=Spend(day.isoformat(), tokens, round(cost, 9)),
        app_error=state.app_error,
    )


@dataclass(frozen=True)
class PastMemory:
    """A memory the agent held at the moment."""

    memory_id: UUID
    content: str
    tags: list[str]
    created_at: datetime
    run_id: UUID
    position: int
    embedding_model: str
    """The model that indexed it: as recorded, or the configured one for older events."""
    embedding_model_recorded: bool


def memories_at(history: History, default_model: str) -> list[PastMemory]:
    """The agent's memories at the moment, oldest first: remembered by then, and neither
    forgotten nor archived (MemoryArchived: at the memory limit, or not recalled for
    ``memory.archive_after_days``) by then. ``default_model``
    stands for the embedding model of memories whose event does not record it.

    The memory view also moves an agent's oldest memories out of recall when its MEMORY.md
    outgrows ``memory.memory_md_limit_bytes``; no event records that, so it is not applied
    here."""
    held: dict[UUID, PastMemory] = {}
    for logged in history.events:
        e = logged.event
        if isinstance(e, ev.MemoryRemembered) and e.agent_id == history.agent_id:
            held[e.memory_id] = PastMemory(
                memory_id=e.memory_id,
                content=e.content,
                tags=list(e.tags),
                created_at=e.timestamp,
                run_id=e.originator_id,
                position=logged.position,
                embedding_model=e.embedding_model or default_model,
                embedding_model_recorded=bool(e.embedding_model),
            )
        elif isinstance(e, ev.MemoryForgotten):
            held.pop(e.memory_id, None)
        elif isinstance(e, ev.MemoryArchived):
            for memory_id in e.memory_ids:
                held.pop(memory_id, None)
    return list(held.values())


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def recall_at(
    memories: Sequence[PastMemory],
    query: str,
    at: datetime,
    embedder: Callable[[str], Embedder],
    *,
    half_life_days: float,
    limit: int = 5,
    min_similarity: float | None = None,
) -> list[Memory]:
    """``query`` recalled from ``memories`` as the ``recall`` tool ranks: each memory embedded
    with the model that indexed it (``embedder(model)``), compared with the query in that
    model's space; the nearest ``limit x 4`` ranked by similarity x decay as of ``at``."""
    by_model: dict[str, list[PastMemory]] = {}
    for memory in memories:
        by_model.setdefault(memory.embedding_model, []).append(memory)
    scored = []
    for model, group in by_model.items():
        vectors = embedder(model).embed([query, *(m.content for m in group)])
        scored += [
            (m.memory_id, m.content, m.tags, m.created_at, _cosine(vectors[0], v))
            for m, v in zip(group, vectors[1:], strict=True)
        ]
    scored.sort(key=lambda c: -c[4])
    nearest = scored[: limit * MemoryStore.CANDIDATES_PER_RESULT]
    return rank(nearest, at, half_life_days * 86400.0, limit, min_similarity)
