"""A run's decision manifest (``owlclaw explain``) as data: what ``owlclaw.audit.explain`` reads
from the ledger, and what a server sends the CLI, which decodes it without importing the
ledger's driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class IdentityVersion:
    """One IdentityLoaded: the app's files (by sha256) an agent ran with from then on."""

    number: int
    """1 for the agent's first identity, then each change."""
    position: int
    loaded_at: datetime
    soul_sha256: str
    identity_sha256: str
    config_sha256: str
    code_sha256: str
    skills: dict[str, str]
    """Skill name -> sha256 of its SKILL.md."""
    governance: dict[str, Any]
    """The [governance] table ({} when recorded before it was kept)."""
    changed: list[str]
    """What differs from the previous version (every file for the first one)."""


@dataclass(frozen=True)
class Call:
    """A tool call a step decided on, and what became of it."""

    call_id: str
    tool: str
    arguments: str
    outcome: str = "no outcome recorded"


@dataclass(frozen=True)
class RecalledMemory:
    memory_id: str
    relevance: float
    """Similarity x decay when the run recalled it."""
    content: str


@dataclass(frozen=True)
class Step:
    number: int
    """1 for the run's first model answer."""
    version: int
    """Its LLMResponded's version in the run stream."""
    position: int
    at: datetime
    model: str
    fallback_hops: list[str]
    """The models of the path that failed before ``model`` answered, with their errors."""
    usage: dict[str, int]
    cost_usd: float
    latency_ms: float
    answer: str | None
    """The final answer when the step called no tool."""
    calls: list[Call]
    governance: list[str]
    """What governance decided about its calls: denials (rate limits, governance rules),
    approvals asked and how they were answered."""
    recalled: list[RecalledMemory]
    """What its ``recall`` calls returned, with the relevance each memory was ranked by."""


@dataclass(frozen=True)
class Manifest:
    agent_id: str
    run_no: int
    run_id: UUID
    trigger: str
    triggered_by: str | None
    """The principal whose request queued the run; None when no operator did."""
    focus: str | None
    started_at: datetime | None
    ended: str
    """How the run ended (its end event, with the reason), or "not ended"."""
    identity: IdentityVersion | None
    """The identity version the run ran with; ``changed`` names what it changed."""
    changed_since_previous_run: list[str]
    """App files that differ from the identity the agent's previous run ran with."""
    skills_in_prompt: list[str]
    skill_index: list[str]
    memories: list[RecalledMemory]
    visible_tools: list[str]
    hidden_tools: dict[str, str]
    """Tool -> why the model did not see it."""
    model_path: list[str]
    rate_limits: dict[str, Any]
    budget: dict[str, Any]
    """The daily limits in effect and the BudgetExceeded this run caused."""
    tokens: int
    cost_usd: float
    steps: list[Step] = field(default_factory=list)
    plan: list[dict[str, str]] = field(default_factory=list)
    """The run's current plan: the items of its last update_plan (empty: none, or erased)."""
    prompt_tokens: int | None = None
    """The system prompt's tokens as the run counted them (None: recorded before they were)."""
    prompt_trimmed: dict[str, list[Any]] = field(default_factory=dict)
    """Part -> what the prompt's token budget left out of it (docs/limits.md)."""
