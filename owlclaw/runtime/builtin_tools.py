"""The built-in tools: schedule_once, schedule_cron, cancel_schedule, remember, recall,
query_state, log_decision.

A tool whose effect *is* a ledger fact (a memory, a decision, a schedule request) records that
event on the run or agent aggregate; the decision loop commits it with the tool's result.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import msgspec

from events import catalog as ev
from events.aggregates import Agent, Run, now
from owlclaw.runtime.capabilities import Registry, UnknownState
from owlclaw.tools import builtin_params as p
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import ToolSpec
from projections.memory import MemoryStore

MAX_ACTIVE_SCHEDULES = 100
MAX_MEMORIES = 10_000

SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "schedule_once",
            "Schedule a one-time delayed run of yourself. Use it to "
            "check something later or wait for an event.",
            p.ScheduleOnce,
        ),
        ToolSpec(
            "schedule_cron",
            "Schedule recurring runs of yourself with a 5-field cron "
            "expression (UTC), e.g. every hour during trading hours.",
            p.ScheduleCron,
        ),
        ToolSpec(
            "cancel_schedule",
            "Cancel one of your schedules that is no longer needed.",
            p.CancelSchedule,
        ),
        ToolSpec(
            "remember", "Store a lesson, pattern or decision in your long-term memory.", p.Remember
        ),
        ToolSpec(
            "recall",
            "Search your long-term memory for relevant past experience.",
            p.Recall,
            idempotent=True,
        ),
        ToolSpec(
            "query_state",
            "Read current business state before deciding.",
            p.QueryState,
            idempotent=True,
        ),
        ToolSpec(
            "log_decision", "Record why you chose an action, or chose not to act.", p.LogDecision
        ),
    )
}


@dataclass
class ToolContext:
    agent: Agent
    run: Run
    registry: Registry
    memory: MemoryStore | None
    committed_position: int
    """The log position of the run's last commit: recall waits for the view to reach it."""


def _error(message: str, code: str, *, kind: str = "user", retryable: bool = False) -> ToolError:
    return ToolError(error=message, error_code=code, kind=kind, retryable=retryable)  # type: ignore[arg-type]


async def run_builtin(  # noqa: PLR0911 - one return per tool
    name: str, params: msgspec.Struct, call_id: str, ctx: ToolContext
) -> Any:
    """Execute a built-in tool; returns its result, or a ToolError."""
    match params:
        case p.ScheduleOnce(delay_seconds=delay, focus=focus):
            return _schedule(ctx, "once", focus, delay_seconds=delay)
        case p.ScheduleCron(cron_expression=expression, focus=focus):
            try:
                p.check_cron(expression)
            except p.CronError as e:
                return _error(str(e), "INVALID_CRON")
            return _schedule(ctx, "cron", focus, cron=expression)
        case p.CancelSchedule(schedule_id=schedule_id):
            if schedule_id not in ctx.agent.state.schedules:
                return _error(
                    f"no active schedule {schedule_id!r} of this agent", "SCHEDULE_NOT_FOUND"
                )
            ctx.agent.record(
                ev.ScheduleCancelled,
                schedule_id=schedule_id,
                reason=f"cancelled by run {ctx.run.id}",
            )
            return {"success": True, "schedule_id": schedule_id}
        case p.Remember(content=content, tags=tags):
            return await _remember(ctx, content, tags)
        case p.Recall(query=query, limit=limit):
            return await _recall(ctx, query, limit)
        case p.QueryState(state_name=state_name):
            try:
                return await ctx.registry.read_state(state_name)
            except UnknownState as e:
                return _error(str(e), "UNKNOWN_STATE")
            except TimeoutError:
                return _error(
                    f"state provider {state_name!r} timed out",
                    "STATE_TIMEOUT",
                    kind="system",
                    retryable=True,
                )
        case p.LogDecision(reasoning=reasoning, decision_type=decision_type):
            event = ctx.run.record(
                ev.DecisionLogged, decision_type=decision_type, reasoning=reasoning, call_id=call_id
            )
            return {
                "decision_id": f"{ctx.run.id}:{event.originator_version}",
                "timestamp": event.timestamp.isoformat(),
            }
    raise AssertionError(f"no built-in tool {name}")


async def _remember(ctx: ToolContext, content: str, tags: list[str]) -> Any:
    if ctx.memory is not None:
        held = await asyncio.to_thread(ctx.memory.count, ctx.agent.agent_id)
        if held >= MAX_MEMORIES:
            return _error(
                f"this agent already holds {held} memories (limit {MAX_MEMORIES})",
                "MEMORY_LIMIT",
            )
    memory_id = uuid.uuid4()
    event = ctx.run.record(
        ev.MemoryRemembered,
        agent_id=ctx.agent.agent_id,
        memory_id=memory_id,
        content=content,
        tags=list(tags),
    )
    return {"memory_id": str(memory_id), "timestamp": event.timestamp.isoformat()}


async def _recall(ctx: ToolContext, query: str, limit: int) -> Any:
    if ctx.memory is None:
        return _error("long-term memory is not configured", "MEMORY_UNAVAILABLE", kind="system")
    result = await asyncio.to_thread(
        ctx.memory.recall,
        ctx.agent.agent_id,
        query,
        limit,
        after_position=ctx.committed_position,
    )
    if result.warning:
        ctx.run.record(ev.RunWarning, source="recall", message=result.warning)
    return {
        "memories": [
            {
                "memory_id": str(m.memory_id),
                "content": m.content,
                "tags": m.tags,
                "timestamp": m.created_at.isoformat(),
                "relevance": m.relevance,
            }
            for m in result.memories
        ],
        "count": len(result.memories),
        **({"warning": result.warning} if result.warning else {}),
    }


def _schedule(
    ctx: ToolContext,
    kind: str,
    focus: str,
    *,
    delay_seconds: int | None = None,
    cron: str | None = None,
) -> Any:
    if len(ctx.agent.state.schedules) >= MAX_ACTIVE_SCHEDULES:
        return _error(
            f"this agent already has {MAX_ACTIVE_SCHEDULES} active schedules; cancel one first",
            "SCHEDULE_LIMIT",
        )
    schedule_id = f"sch_{uuid.uuid4().hex[:12]}"
    fire_at = now() + timedelta(seconds=delay_seconds) if delay_seconds is not None else None
    ctx.agent.record(
        ev.ScheduleRequested,
        schedule_id=schedule_id,
        kind=kind,
        focus=focus,
        owner_run_id=ctx.run.id,
        agent_id=ctx.agent.agent_id,
        delay_seconds=delay_seconds,
        cron=cron,
        fire_at=fire_at,
    )
    result: dict[str, Any] = {"schedule_id": schedule_id, "focus": focus}
    if fire_at is not None:
        result["scheduled_at"] = fire_at.isoformat()
    if cron is not None:
        result["cron_expression"] = cron
    return result
