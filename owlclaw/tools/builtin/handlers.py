"""The built-in tools: schedule_once, schedule_cron, cancel_schedule, list_schedules,
load_skill, remember, recall, forget, query_state, log_decision, update_plan, ask_human.

A tool whose effect *is* a ledger fact (a memory, a decision, a schedule request) records that
event on the run or agent aggregate; the executor commits it with the tool's result. Each is a
``Tool`` like an app's capabilities.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from events import catalog as ev
from events.agent_state import ActiveSchedule
from events.cron import CronError, check_cron
from events.streams import now
from owlclaw.tools.builtin import params as p
from owlclaw.tools.builtin.schedule_order import soonest_first
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.states import MAX_STATE_TIMEOUT_SECONDS, StateTimedOut, UnknownState
from owlclaw.tools.tool import RunScope, ToolContext

MAX_ACTIVE_SCHEDULES = 100


@dataclass(frozen=True)
class BuiltinTool:
    spec: ToolSpec
    run: Callable[[Any, RunScope, str], Awaitable[Any]]

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        return await self.run(params, ctx.scope, ctx.call_id)


def _error(message: str, code: str, *, kind: str = "user", retryable: bool = False) -> ToolError:
    return ToolError(error=message, error_code=code, kind=kind, retryable=retryable)  # type: ignore[arg-type]


async def _schedule_once(params: p.ScheduleOnce, ctx: RunScope, call_id: str) -> Any:
    return _schedule(
        ctx, "once", params.focus, params.on_missed, delay_seconds=params.delay_seconds
    )


async def _schedule_cron(params: p.ScheduleCron, ctx: RunScope, call_id: str) -> Any:
    try:
        check_cron(params.cron_expression)
    except CronError as e:
        return _error(str(e), "INVALID_CRON")
    return _schedule(ctx, "cron", params.focus, params.on_missed, cron=params.cron_expression)


async def _cancel_schedule(params: p.CancelSchedule, ctx: RunScope, call_id: str) -> Any:
    schedule_id = params.schedule_id
    if schedule_id not in ctx.agent.state.schedules:
        return _error(f"no active schedule {schedule_id!r} of this agent", "SCHEDULE_NOT_FOUND")
    ctx.agent.cancel_schedule(schedule_id, by="agent", reason=f"cancelled by run {ctx.run.id}")
    return {"success": True, "schedule_id": schedule_id}


async def _list_schedules(params: p.ListSchedules, ctx: RunScope, call_id: str) -> Any:
    schedules = [
        _schedule_entry(schedule_id, schedule, fire)
        for schedule_id, schedule, fire in soonest_first(ctx.agent.state.schedules, now())
        if params.kind is None or schedule.kind == params.kind
    ]
    return {"schedules": schedules, "count": len(schedules)}


async def _load_skill(params: p.LoadSkill, ctx: RunScope, call_id: str) -> Any:
    skill = ctx.skills.get(params.name)
    if skill is None:
        known = ", ".join(sorted(ctx.skills)) or "none"
        return _error(f"no skill named {params.name!r} (skills: {known})", "UNKNOWN_SKILL")
    return {"name": skill.meta.name, "sha256": skill.sha256, "content": skill.body()}


def _schedule_entry(
    schedule_id: str, schedule: ActiveSchedule, fire: datetime | None
) -> dict[str, Any]:
    """One active schedule as the model sees it; a cron expression that no longer fires has
    no next fire (None) rather than failing the whole listing."""
    return {
        "schedule_id": schedule_id,
        "kind": schedule.kind,
        "focus": schedule.focus,
        "next_fire": fire.isoformat() if fire is not None else None,
        "cron_expression": schedule.cron,
        "on_missed": schedule.on_missed,
        "owner_run_id": str(schedule.owner_run_id) if schedule.owner_run_id else None,
    }


async def _query_state(params: p.QueryState, ctx: RunScope, call_id: str) -> Any:
    """A slow provider is a timeout (not retried here; the model may ask again)."""
    try:
        return await ctx.states.read_state(
            params.state_name, ctx.threads, ctx.limits.tool_timeout_s
        )
    except UnknownState as e:
        return _error(str(e), "UNKNOWN_STATE")
    except StateTimedOut as e:
        return _error(str(e), "STATE_TIMEOUT", kind="timeout", retryable=True)


async def _log_decision(params: p.LogDecision, ctx: RunScope, call_id: str) -> Any:
    event = ctx.run.record(
        ev.DecisionLogged,
        decision_type=params.decision_type,
        reasoning=params.reasoning,
        call_id=call_id,
    )
    return {
        "decision_id": f"{ctx.run.id}:{event.originator_version}",
        "timestamp": event.timestamp.isoformat(),
    }


async def _update_plan(params: p.UpdatePlan, ctx: RunScope, call_id: str) -> Any:
    items = [msgspec.to_builtins(item) for item in params.items]
    ctx.run.record(ev.PlanUpdated, items=items, call_id=call_id)
    done = sum(item.status == "done" for item in params.items)
    return {"items": len(items), "done": done}


async def _ask_human(params: p.AskHuman, ctx: RunScope, call_id: str) -> Any:
    """Runs once the question is answered or expired (the executor parks the run until then):
    the answer, or a structured "no answer" the model decides on."""
    asked = ctx.agent.approval_for(ctx.run.id, call_id)
    if asked is None or asked.status not in ("granted", "expired"):
        return _error(f"question {call_id} has no answer on record", "NO_QUESTION", kind="system")
    if asked.status == "expired":
        return {
            "answered": False,
            "reason": f"nobody answered before {asked.expires_at.isoformat()}",
        }
    return {"answered": True, "answer": asked.answer, "by": asked.by}


async def _remember(params: p.Remember, ctx: RunScope, call_id: str) -> Any:
    memory_id = uuid.uuid4()
    archived = ctx.agent.add_memory(memory_id, ctx.run.id, ctx.limits.max_memories)
    event = ctx.run.record(
        ev.MemoryRemembered,
        agent_id=ctx.agent.agent_id,
        memory_id=memory_id,
        content=params.content,
        tags=list(params.tags),
        embedding_model=ctx.memory.view.embedder.model if ctx.memory is not None else "",
    )
    result: dict[str, Any] = {"memory_id": str(memory_id), "timestamp": event.timestamp.isoformat()}
    if archived:
        result["archived_memory_ids"] = [str(m) for m in archived]
    return result


async def _forget(params: p.Forget, ctx: RunScope, call_id: str) -> Any:
    if params.memory_id not in ctx.agent.state.memories:
        return _error(
            f"no active memory {str(params.memory_id)!r} of this agent"
            " (unknown, already forgotten or archived)",
            "MEMORY_NOT_FOUND",
        )
    ctx.agent.record(ev.MemoryForgotten, memory_id=params.memory_id, run_id=ctx.run.id)
    return {"success": True, "memory_id": str(params.memory_id)}


async def _recall(params: p.Recall, ctx: RunScope, call_id: str) -> Any:
    if ctx.memory is None:
        return _error("long-term memory is not configured", "MEMORY_UNAVAILABLE", kind="system")
    result = await asyncio.to_thread(
        ctx.memory.recall,
        ctx.agent.agent_id,
        params.query,
        params.limit,
        after_position=await ctx.committed_position(),
        min_similarity=ctx.limits.recall_min_similarity,
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
                **({"run": m.source.run_no} if m.source and m.source.run_no else {}),
            }
            for m in result.memories
        ],
        "count": len(result.memories),
        **({"warning": result.warning} if result.warning else {}),
    }


def _schedule(
    ctx: RunScope,
    kind: str,
    focus: str,
    on_missed: ev.OnMissed,
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
        on_missed=on_missed,
    )
    result: dict[str, Any] = {"schedule_id": schedule_id, "focus": focus}
    if fire_at is not None:
        result["scheduled_at"] = fire_at.isoformat()
    if cron is not None:
        result["cron_expression"] = cron
    return result


def _builtin(name: str, description: str, params: type[p.Params], run: Any, **meta: Any) -> Any:
    spec = ToolSpec(name, description, params, effect_in_ledger=True, **meta)
    return name, BuiltinTool(spec, run)


BUILTINS: dict[str, BuiltinTool] = dict(
    (
        _builtin(
            "schedule_once",
            "Schedule a one-time delayed run of yourself. Use it to "
            "check something later or wait for an event.",
            p.ScheduleOnce,
            _schedule_once,
            category="schedule",
        ),
        _builtin(
            "schedule_cron",
            "Schedule recurring runs of yourself with a 5-field cron "
            "expression (UTC), e.g. every hour during trading hours.",
            p.ScheduleCron,
            _schedule_cron,
            category="schedule",
        ),
        _builtin(
            "cancel_schedule",
            "Cancel one of your schedules that is no longer needed.",
            p.CancelSchedule,
            _cancel_schedule,
            category="schedule",
        ),
        _builtin(
            "list_schedules",
            "List your active schedules (id, kind, focus, next fire, on_missed, the run that "
            "created it), e.g. to find the id to cancel.",
            p.ListSchedules,
            _list_schedules,
            category="schedule",
            idempotent=True,
        ),
        _builtin(
            "load_skill",
            "Read one of your skills in full, by its name from the skill index.",
            p.LoadSkill,
            _load_skill,
            category="skill",
            idempotent=True,
        ),
        _builtin(
            "remember",
            "Store a lesson, pattern or decision in your long-term memory.",
            p.Remember,
            _remember,
            category="memory",
        ),
        _builtin(
            "recall",
            "Search your long-term memory for relevant past experience.",
            p.Recall,
            _recall,
            category="memory",
            idempotent=True,
        ),
        _builtin(
            "forget",
            "Forget one of your memories that is wrong or no longer useful (by its id).",
            p.Forget,
            _forget,
            category="memory",
        ),
        _builtin(
            "query_state",
            "Read current business state before deciding.",
            p.QueryState,
            _query_state,
            category="state",
            idempotent=True,
            timeout_s=MAX_STATE_TIMEOUT_SECONDS + 5,  # the provider's own limit fires first
        ),
        _builtin(
            "log_decision",
            "Record why you chose an action, or chose not to act.",
            p.LogDecision,
            _log_decision,
            category="decision",
        ),
        _builtin(
            "update_plan",
            "Write down your plan for this run as a list of steps with their status "
            "(pending, in_progress, done); each call replaces the whole plan, which the "
            "operator sees.",
            p.UpdatePlan,
            _update_plan,
            category="decision",
        ),
        _builtin(
            "ask_human",
            "Ask a person a question (to clarify the task, or to decide between options) and "
            "wait for the answer, which is the result; your run pauses until then. With "
            "options, the answer is one of them. If nobody answers in time the result is "
            '{"answered": false} and you decide without it.',
            p.AskHuman,
            _ask_human,
            category="decision",
            question=True,
        ),
    )
)
"""The built-in tools by name, in the order the model sees them."""
