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
from owlclaw.app import AgentApp, Skill, select_skills
from owlclaw.config import RuntimeConfig
from owlclaw.llm.tokens import TokenCount, token_counter
from owlclaw.runtime.context import ContextItem, build_context
from owlclaw.runtime.inbound_prompt import inbound_section
from owlclaw.runtime.memories_prompt import memories_section
from owlclaw.runtime.prompt_budget import Part, fit
from owlclaw.runtime.schedules_prompt import schedules_section
from owlclaw.runtime.skills_prompt import skills_index
from projections.recall import MemoryStore, RecallResult
from projections.relevance import Memory

DEFAULT_IDENTITY = "You are an autonomous agent. Use your tools, then answer briefly."
"""The identity of an agent without an app."""


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
    model: str | None = None,
) -> Prompt:
    """Identity, what arrived since the last run (``inbound``, a heartbeat's), the agent's
    active ``schedules``, recalled memories (only with ``memory`` set), recent activity
    (``recent``: each past run's (text, importance) items, oldest first) and skills; plus the
    inputs.

    A recorded run's prompt is rebuilt with the memories it ``recalled`` (instead of recalling
    now) and the time ``at`` which it started (when schedules' next fires are computed).

    The whole prompt is within ``limits.prompt_tokens`` of ``model``'s tokens (default: the
    first of ``limits.models``), trimmed in ``prompt_budget.ORDER``; the inputs record its
    tokens and what was trimmed.

    ``active_memories``: the agent's, as its stream counts them (None: not known). With none,
    the recall finds nothing without asking the memory index: a round trip to PostgreSQL
    (~1 ms of a host's CPU) saved on every run of an agent that remembers nothing."""
    count = token_counter(model or limits.models[0])
    inputs: dict[str, Any] = {}
    warning = None
    if app is None:
        core = [DEFAULT_IDENTITY]
    else:
        core = [app.soul, app.identity]
        inputs |= {"soul_sha256": app.soul_sha256, "identity_sha256": app.identity_sha256}
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
    memories: Sequence[Memory] = ()
    if recalled is not None:
        warning = recalled.warning
        memories = recalled.memories
        inputs["memories"] = {str(m.memory_id): m.relevance for m in memories}
    items = [
        ContextItem(text, importance, order)
        for order, (text, importance) in enumerate(chain.from_iterable(recent))
    ]
    context = build_context(items, limits.context_tokens, count)
    skills = select_skills(app, focus, limits.skills_tokens, count) if app is not None else []
    parts = _parts(
        inbound,
        schedules_section(schedules or {}, at or now()),
        memories,
        (len(items), context),
        app.skills if app is not None else {},
        skills,
        count,
    )
    fitted = fit(core, parts, limits.prompt_tokens, count)
    listed = {p.name: list(p.items) for p in parts}
    kept = {name: len(items) - len(fitted.trimmed.get(name, ())) for name, items in listed.items()}
    if shown := inbound_section(inbound, kept["inbound"])[1]:
        inputs["inbound"] = shown
    if kept["schedules"]:
        inputs["schedules"] = listed["schedules"]
    if app is not None:
        if listed["skill_descriptions"]:
            inputs["skill_index"] = listed["skill_descriptions"]
        inputs["skills"] = [s.meta.name for s in skills[: kept["skill_bodies"]]]
    inputs["prompt_tokens"] = fitted.tokens
    if fitted.trimmed:
        inputs["trimmed"] = fitted.trimmed
    return Prompt(fitted.text, inputs, warning)


def _parts(
    inbound: Sequence[ev.LedgerEvent],
    schedules: tuple[str | None, list[str]],
    memories: Sequence[Memory],
    recent: tuple[int, str],
    all_skills: Mapping[str, Skill],
    in_full: Sequence[Skill],
    count: TokenCount,
) -> list[Part]:
    """The trimmable parts in the order the prompt shows them (``prompt_budget.ORDER`` says
    which goes first)."""
    arrived = inbound_section(inbound)[1]
    schedules_text, shown_schedules = schedules
    recent_items, context = recent
    bodies = [f"## Skill: {s.meta.name}\n{s.body()}" for s in in_full]
    names = [s.meta.name for s in in_full]

    def index(keep: Mapping[str, int]) -> str | None:
        described = bool(keep["skill_descriptions"])
        bodies_kept = names[: keep["skill_bodies"]]
        return skills_index(all_skills, bodies_kept, count, names_only=not described)[0] or None

    return [
        Part("inbound", arrived[::-1], lambda keep: inbound_section(inbound, keep["inbound"])[0]),
        Part(
            "schedules", shown_schedules, lambda keep: schedules_text if keep["schedules"] else None
        ),
        Part(
            "memories",
            [str(m.memory_id) for m in memories],
            lambda keep: memories_section(memories[: keep["memories"]]),
        ),
        Part(
            "recent_activity",
            [recent_items] if context else [],
            lambda keep: context if keep["recent_activity"] else None,
        ),
        Part(
            "skill_descriptions",
            skills_index(all_skills, names, count)[1],
            index,
            reads=("skill_bodies",),
        ),
        Part(
            "skill_bodies", names, lambda keep: "\n\n".join(bodies[: keep["skill_bodies"]]) or None
        ),
    ]


def check_core(app: AgentApp, limits: RuntimeConfig, models: Sequence[str]) -> None:
    """PromptTooLarge when the app's untrimmable core (SOUL.md, IDENTITY.md and its skill
    names) alone exceeds ``limits.prompt_tokens`` of its first model's tokens: every run's
    prompt would be over budget."""
    count = token_counter((list(app.settings.models) or list(models) or list(limits.models))[0])
    index = _parts((), (None, []), (), (0, ""), app.skills, [], count)
    what = f"{app.root}: SOUL.md, IDENTITY.md and the skill names"
    fit([app.soul, app.identity], index, limits.prompt_tokens, count, what)
