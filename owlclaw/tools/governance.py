"""What an agent may do: visible tools (tools the operator disabled, allow/deny lists and skill
constraints; deny wins), which calls wait for a person's approval (ask, ask_if, the default),
per-tool rate limits (enforced by ``rate_limits.RateLimiter``) and a daily token/cost budget.

Every filtered tool carries its reason, so "why couldn't the agent do X" is answered by the
ledger (VisibleToolsResolved, ToolCallDenied, BudgetExceeded).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import date, datetime
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Annotated, Any, Literal

import msgspec

from events import Ledger
from events.agent import Agent
from events.streams import run_stream_id
from owlclaw.app import RateLimit, Skill
from owlclaw.struct_errors import describe
from owlclaw.tools.conditions import Condition, ConditionError

MAX_APPROVERS = 5
OPERATOR_DISABLED = "disabled by the operator (owlclaw tools --enable re-enables it)"


class Governance(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[governance]`` table of an app's owlclaw.toml."""

    allow: tuple[str, ...] = ()
    """Only these tools are visible; empty means all. Globs (``send_*``), like deny and ask."""
    deny: tuple[str, ...] = ()
    """Never visible, even when allowed."""
    ask: tuple[str, ...] = ()
    """Calls to these tools wait for a person's approval (deny wins over ask, ask over allow)."""
    ask_if: dict[str, str] = {}
    """Tool name -> condition on its arguments (``"amount > 1000"``) under which a call waits
    for approval; see ``owlclaw.tools.conditions``."""
    default: Literal["allow", "ask"] = "allow"
    """What a visible tool that neither ``ask`` nor ``ask_if`` names does."""
    approvers: tuple[str, ...] = ()
    """Who may answer this agent's approvals; empty means any operator."""
    approval_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0
    """A request nobody answers in this time expires, which counts as denied."""
    approvals_required: dict[str, Annotated[int, msgspec.Meta(ge=1, le=MAX_APPROVERS)]] = {}
    """Tool name or glob -> how many different principals must grant its calls (default 1)."""
    rate_limits: dict[str, RateLimit] = {}
    """Tool name -> at most ``calls`` calls per ``per_seconds`` for this agent."""
    message_agents: tuple[str, ...] = ()
    """Agent ids (globs: ``billing-*``) send_to_agent may message; empty means none, and the
    agent has no send_to_agent."""
    message_max_hops: Annotated[int, msgspec.Meta(ge=1, le=100)] = 8
    """A message is refused when it would be hop number ``message_max_hops + 1`` of a chain of
    messages between agents (a run another agent's message started carries that count on)."""
    reply_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    """How long a run waits for the reply it asked for before it gets a ``NO_REPLY`` error."""
    daily_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Tokens per UTC day for this agent; a run that reaches it ends with BudgetExceeded."""
    daily_cost_usd: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """Model cost per UTC day for this agent (as litellm prices it)."""

    @classmethod
    def from_app_config(cls, config: Mapping[str, Any], source: str = "owlclaw.toml") -> Governance:
        """Validate the table; ValueError names ``source`` and the offending field."""
        table = config.get("governance", {})
        try:
            governance = msgspec.convert(table, cls)
        except msgspec.ValidationError as e:
            raise ValueError(f"{source}: {describe(e, cls, table, 'governance')}") from e
        for tool, text in governance.ask_if.items():
            try:
                Condition.parse(text)
            except ConditionError as e:
                raise ValueError(f"{source}: [governance] ask_if.{tool}: {e}") from e
        for tool, needed in governance.approvals_required.items():
            if governance.approvers and needed > len(set(governance.approvers)):
                raise ValueError(
                    f"{source}: [governance] approvals_required.{tool} = {needed}, but"
                    f" approvers names only {len(set(governance.approvers))}"
                )
        return governance

    def tool_patterns(self) -> Iterator[tuple[str, str]]:
        """(key, tool name or glob) of every entry that names tools."""
        for key, patterns in (
            ("allow", self.allow),
            ("deny", self.deny),
            ("ask", self.ask),
            ("ask_if", tuple(self.ask_if)),
            ("rate_limits", tuple(self.rate_limits)),
            ("approvals_required", tuple(self.approvals_required)),
        ):
            for pattern in patterns:
                yield key, pattern

    def approval_reason(
        self, tool: str, arguments: Mapping[str, Any], declared: str | None = None
    ) -> str | None:
        """Why a call of a visible tool waits for approval, or None when it may go ahead.
        ``declared``: the tool's own ask_if (the app's table wins)."""
        if _matches(tool, self.ask):
            return "governance.ask names it"
        if (text := self.ask_if.get(tool, declared)) is not None:
            return f"ask_if: {text}" if Condition.parse(text).holds(arguments) else None
        return "the agent's default is ask" if self.default == "ask" else None

    def approvals_needed(self, tool: str) -> int:
        """How many different principals must grant a call of ``tool`` (the most any matching
        entry asks for)."""
        return max(
            (n for pattern, n in self.approvals_required.items() if fnmatchcase(tool, pattern)),
            default=1,
        )

    def resolve(
        self,
        tools: Iterable[str],
        skills: Mapping[str, Skill] | None = None,
        at: datetime | None = None,
        disabled: frozenset[str] = frozenset(),
    ) -> tuple[list[str], dict[str, str]]:
        """Visible tool names, and the reason each other tool is hidden.

        A skill's ``owlclaw.constraints`` apply to the capability of the same name; ``disabled``
        are the tools the operator disabled (the Agent's ToolsChanged), hidden whatever the app
        says.
        """
        visible: list[str] = []
        filtered: dict[str, str] = {}
        for name in tools:
            skill = (skills or {}).get(name)
            if name in disabled:
                filtered[name] = OPERATOR_DISABLED
            elif _matches(name, self.deny):
                filtered[name] = "denied by governance.deny"
            elif self.allow and not _matches(name, (*self.allow, *self.ask, *self.ask_if)):
                filtered[name] = "not in governance.allow"
            elif skill is not None and (reason := skill_hides(skill, at)) is not None:
                filtered[name] = reason
            else:
                visible.append(name)
        return visible, filtered

    def rate_limits_with(self, skills: Mapping[str, Skill]) -> dict[str, RateLimit]:
        """Governance limits, plus skill limits where governance sets none for that tool."""
        limits = {
            name: s.meta.owlclaw.constraints.rate_limit
            for name, s in skills.items()
            if s.meta.owlclaw.constraints.rate_limit is not None
        }
        return {**limits, **self.rate_limits}

    def may_message(self, agent_id: str) -> bool:
        """Whether send_to_agent may message ``agent_id`` (``message_agents``)."""
        return _matches(agent_id, self.message_agents)


@lru_cache(maxsize=8192)
def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Remembered: every model call of every run asks it for each tool the agent has."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def skill_hides(skill: Skill, at: datetime | None) -> str | None:
    constraints = skill.meta.owlclaw.constraints
    if not constraints.visible:
        return f"hidden by skill {skill.meta.name}: constraints.visible = false"
    if constraints.hours_utc is not None and at is not None:
        start, end = constraints.hours_utc
        inside = start <= at.hour < end if start <= end else (at.hour >= start or at.hour < end)
        if not inside:
            return f"outside skill {skill.meta.name}'s hours_utc {start}-{end} (now {at.hour}h)"
    return None


def spent_today(ledger: Ledger, agent: Agent, day: date) -> tuple[int, float]:
    """Tokens and cost of the agent's runs started on ``day`` (UTC), read from the ledger.

    The budget is durable this way: a runtime reads it when it is built (activation after
    passivation, a restart) or when the day changes, and adds each run it finishes, so neither
    a restart nor an app change resets it. Runs are numbered in start order, so the scan walks
    back from the latest until the day before.
    """
    tokens, cost = 0, 0.0
    for run_no in range(agent.state.run_count, 0, -1):
        run = ledger.load_run(run_stream_id(agent.agent_id, run_no)).state
        if run.started_at is not None and run.started_at.date() < day:
            break
        tokens += run.tokens
        cost += run.cost_usd
    return tokens, cost
