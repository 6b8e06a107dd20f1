"""The system prompt of a run: identity, recalled memories, recent activity and skills, plus the
inputs the decision was based on (recorded with the run's first LLMResponded)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import chain
from typing import Any
from uuid import UUID

from events import catalog as ev
from events.agent_state import ActiveSchedule
from events.streams import now
from owlclaw.app import AgentApp, select_skills
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.context import ContextItem, build_context
from owlclaw.runtime.inbound_prompt import inbound_section
from owlclaw.runtime.memories_prompt import memories_section
from owlclaw.runtime.schedules_prompt import schedules_section
from owlclaw.runtime.skills_prompt import skills_index
from projections.recall import MemoryStore, RecallResult


@dataclass(frozen=True)
class Prompt:
    text: str
    inputs: dict[str, Any]
    """What the decision was based on, recorded with the first LLMResponded of the run."""
    warning: str | None = None
    """Set when recall degraded; recorded as a RunWarning."""


async def system_prompt(
    app: AgentApp | None,
    limits: RuntimeConfig,
    recent: Iterable[list[tuple[str, int]]],
    focus: str | None,
    trigger: str,
    *,
    memory: MemoryStore | None = None,
    agent_id: str = "",
    schedules: Mapping[str, ActiveSchedule] | None = None,
    inbound: Sequence[ev.LedgerEvent] = (),
    recalled: RecallResult | None = None,
    active_memories: Sequence[UUID] | None = None,
    at: datetime | None = None,
) -> Prompt:
    """Identity, what arrived since the last run (``inbound``, a heartbeat's), the agent's
    active ``schedules``, recalled memories (only with ``memory`` set), recent activity
    (``recent``: each past run's (text, importance) items, oldest first) and skills; plus the
    inputs.

    A recorded run's prompt is rebuilt with the memories it ``recalled`` (instead of recalling
    now) and the time ``at`` which it started (when schedules' next fires are computed).

    ``active_memories``: the agent's, as its stream counts them (None: not known). With none,
    the recall finds nothing without asking the memory index: a round trip to PostgreSQL
    (~1 ms of a host's CPU) saved on every run of an agent that remembers nothing."""
    inputs: dict[str, Any] = {}
    warning = None
    if app is None:
        parts = ["You are an autonomous agent. Use your tools, then answer briefly."]
    else:
        parts = [app.soul, app.identity]
        inputs |= {"soul_sha256": app.soul_sha256, "identity_sha256": app.identity_sha256}
    arrived, versions = inbound_section(inbound)
    if arrived:
        parts.append(arrived)
        inputs["inbound"] = versions
    section, shown = schedules_section(schedules or {}, at or now())
    if section:
        parts.append(section)
        inputs["schedules"] = shown
    if recalled is None and memory is not None and limits.recall_in_prompt:
        recalled = (
            RecallResult([], None)
            if active_memories is not None and not active_memories
            else await asyncio.to_thread(
                partial(memory.recall, min_similarity=limits.recall_min_similarity),
                agent_id,
                focus or trigger,
                limits.recall_in_prompt,
            )
        )
    if recalled is not None:
        warning = recalled.warning
        if section := memories_section(recalled.memories):
            parts.append(section)
        inputs["memories"] = {str(m.memory_id): m.relevance for m in recalled.memories}
    items = [
        ContextItem(text, importance, order)
        for order, (text, importance) in enumerate(chain.from_iterable(recent))
    ]
    if context := build_context(items, limits.context_tokens):
        parts.append(context)
    if app is not None:
        skills = select_skills(app, focus, limits.skills_tokens)
        index, listed = skills_index(app.skills, {s.meta.name for s in skills})
        if index:
            parts.append(index)
            inputs["skill_index"] = listed
        parts += [f"## Skill: {s.meta.name}\n{s.body()}" for s in skills]
        inputs["skills"] = [s.meta.name for s in skills]
    return Prompt("\n\n".join(parts), inputs, warning)
