"""The decision manifest of a run: what each of its model decisions was based on and what
governed it, read from the recorded events alone (no view, no app directory, no model).

A step is one recorded model answer (LLMResponded). The run's first answer records the inputs
of its prompt (identity hashes, recalled memories with their scores, skills, model path); the
agent's stream records the identity version the run ran with (the last IdentityLoaded before the
run's first event), the approvals of its calls and the budget it exceeded.
"""

from __future__ import annotations

from uuid import UUID

from events import Ledger
from events import catalog as ev
from events.ledger_log import LoggedEvent
from events.streams import approval_id_for, run_stream_id
from owlclaw.audit.as_of import changed_files, identity_versions
from owlclaw.audit.manifest import Call, IdentityVersion, Manifest, RecalledMemory, Step


class NotRecorded(LookupError):
    """The run or step asked for is not in the ledger (the message says what there is)."""


def _started_at(history: list[LoggedEvent], run_id: UUID) -> int | None:
    """The log position of the run's first event: the identity loaded before it (committed
    with it, when the app changed while the run waited in the queue) is the one it ran with."""
    return next((h.position for h in history if h.event.originator_id == run_id), None)


def _identity_for(versions: list[IdentityVersion], started: int | None) -> IdentityVersion | None:
    before = [v for v in versions if started is not None and v.position < started]
    return before[-1] if before else None


def explain_run(led: Ledger, agent_id: str, run_no: int, step: int | None = None) -> Manifest:
    """The manifest of run ``run_no`` of ``agent_id``, with every step or only ``step``."""
    history = led.agent_history(agent_id)
    run_id = run_stream_id(agent_id, run_no)
    run = [h for h in history if h.event.originator_id == run_id]
    if not run:
        raise NotRecorded(f"agent {agent_id} has no run {run_no}")
    versions = identity_versions(history)
    identity = _identity_for(versions, run[0].position)
    previous = (
        _identity_for(versions, _started_at(history, run_stream_id(agent_id, run_no - 1)))
        if run_no > 1
        else None
    )
    since = changed_files(previous, identity) if previous and identity else []
    steps = _steps(history, run, run_id)
    if step is not None:
        if not 1 <= step <= len(steps):
            raise NotRecorded(f"run {run_no} of agent {agent_id} has {len(steps)} steps")
        steps = [steps[step - 1]]
    decisions = [h.event for h in run if isinstance(h.event, ev.LLMResponded)]
    inputs = decisions[0].inputs if decisions else {}
    started = next((h.event for h in run if isinstance(h.event, ev.RunStarted)), None)
    queued = next(
        (e for h in history if isinstance(e := h.event, ev.RunQueued) and e.run_id == run_id),
        None,
    )
    end = next((h.event for h in run if isinstance(h.event, ev.RunEnded)), None)
    visible = next((h.event for h in run if isinstance(h.event, ev.VisibleToolsResolved)), None)
    plans = [h.event.items for h in run if isinstance(h.event, ev.PlanUpdated)]
    governance = identity.governance if identity is not None else {}
    return Manifest(
        agent_id=agent_id,
        run_no=run_no,
        run_id=run_id,
        trigger=started.trigger if started else "",
        triggered_by=queued.by if queued else None,
        focus=started.focus if started else None,
        started_at=started.timestamp if started else None,
        ended=_ended(end),
        identity=identity,
        changed_since_previous_run=since,
        skills_in_prompt=list(inputs.get("skills", [])),
        skill_index=list(inputs.get("skill_index", [])),
        memories=_memories(history, inputs.get("memories", {})),
        visible_tools=list(visible.tools) if visible else [],
        hidden_tools=dict(visible.filtered) if visible else {},
        model_path=list(inputs.get("model_path", [])),
        rate_limits=dict(governance.get("rate_limits", {})),
        budget={
            "daily_tokens": governance.get("daily_tokens"),
            "daily_cost_usd": governance.get("daily_cost_usd"),
            "exceeded": [
                {"budget": e.budget, "limit": e.limit, "spent": e.spent, "at": e.timestamp}
                for h in history
                if isinstance(e := h.event, ev.BudgetExceeded) and e.run_id == run_id
            ],
        },
        tokens=sum(d.usage.get("total_tokens", 0) for d in decisions),
        cost_usd=round(sum(d.cost_usd for d in decisions), 9),
        steps=steps,
        plan=list(plans[-1]) if plans and isinstance(plans[-1], list) else [],
        prompt_tokens=inputs.get("prompt_tokens"),
        prompt_trimmed=dict(inputs.get("trimmed", {})),
    )


def _ended(end: ev.LedgerEvent | None) -> str:
    match end:
        case None:
            return "not ended"
        case ev.RunCompleted():
            return "completed"
        case ev.RunTerminated(reason=why, by=str(by)):
            return f"terminated: {why} by {by}"
        case ev.RunFailed(error=why) | ev.RunTerminated(reason=why) | ev.RunSkipped(reason=why):
            return f"{type(end).__name__.removeprefix('Run').lower()}: {why}"
        case ev.RunTimedOut(timeout_s=timeout):
            return f"timed out after {timeout:g} s"
    return type(end).__name__


def _memories(history: list[LoggedEvent], scores: dict[str, float]) -> list[RecalledMemory]:
    contents = {
        str(e.memory_id): e.content
        for h in history
        if isinstance(e := h.event, ev.MemoryRemembered)
    }
    return [
        RecalledMemory(memory_id, float(relevance), contents.get(memory_id, ""))
        for memory_id, relevance in scores.items()
    ]


def _outcome(e: ev.LedgerEvent) -> str | None:  # noqa: PLR0911 - one per outcome event
    match e:
        case ev.ToolCallSucceeded():
            return "succeeded" + (" (result truncated for the model)" if e.truncated else "")
        case ev.ToolCallFailed():
            return f"failed {e.error_code}: {e.error}"
        case ev.ToolCallTimedOut():
            return f"timed out after {e.timeout_s:g} s"
        case ev.ToolOutcomeUnknown():
            return f"outcome unknown: {e.reason}"
        case ev.ToolCallDenied():
            return f"denied{f' {e.error_code}' if e.error_code else ''}: {e.reason}"
        case ev.ToolCallRejected():
            return f"rejected (invalid arguments): {e.error}"
        case ev.RunParked():
            waits = "a sub-agent" if e.spawn_id else "a reply" if e.message_id else "approval"
            return f"parked: waiting for {waits}"
    return None


def _steps(history: list[LoggedEvent], run: list[LoggedEvent], run_id: UUID) -> list[Step]:
    approvals: dict[str, list[str]] = {}
    for h in history:
        e = h.event
        if isinstance(e, ev.ApprovalRequested) and e.run_id == run_id:
            approvals[e.approval_id] = [f"{e.tool} ({e.call_id}) waited for approval: {e.reason}"]
        elif isinstance(e, ev.ApprovalGranted) and e.approval_id in approvals:
            edited = " with edited arguments" if e.arguments is not None else ""
            approvals[e.approval_id].append(f"approval granted by {e.by}{edited}")
        elif isinstance(e, ev.ApprovalDenied) and e.approval_id in approvals:
            approvals[e.approval_id].append(f"approval denied by {e.by}")
        elif isinstance(e, ev.ApprovalExpired) and e.approval_id in approvals:
            approvals[e.approval_id].append("approval expired (denied)")
    answers = [i for i, h in enumerate(run) if isinstance(h.event, ev.LLMResponded)]
    stops = [*answers[1:], len(run)] if answers else []  # a run ended before any answer
    steps = []
    for number, (start, stop) in enumerate(zip(answers, stops, strict=True), start=1):
        answered = run[start].event
        assert isinstance(answered, ev.LLMResponded)
        calls = {
            str(c.get("id") or ""): Call(
                str(c.get("id") or ""),
                str(c.get("function", {}).get("name", "")),
                str(c.get("function", {}).get("arguments", "")),
            )
            for c in answered.message.get("tool_calls") or []
        }
        governance: list[str] = []
        recalled: list[RecalledMemory] = []
        for h in run[start + 1 : stop]:
            call_id = getattr(h.event, "call_id", None)
            if call_id in calls and (outcome := _outcome(h.event)) is not None:
                call = calls[call_id]
                calls[call_id] = Call(call.call_id, call.tool, call.arguments, outcome)
                if isinstance(h.event, ev.ToolCallDenied):
                    governance.append(f"{call.tool} ({call_id}) {outcome}")
                recalled += _recalled(h.event)
        for call_id in calls:
            governance += approvals.get(approval_id_for(run_id, call_id), [])
        steps.append(
            Step(
                number=number,
                version=answered.originator_version,
                position=run[start].position,
                at=answered.timestamp,
                model=answered.model,
                fallback_hops=list(answered.fallback_hops),
                usage=dict(answered.usage),
                cost_usd=answered.cost_usd,
                latency_ms=answered.latency_ms,
                answer=None if calls else str(answered.message.get("content") or ""),
                calls=list(calls.values()),
                governance=governance,
                recalled=recalled,
            )
        )
    return steps


def _recalled(e: ev.LedgerEvent) -> list[RecalledMemory]:
    """The memories a successful ``recall`` call returned (none when its result was cut)."""
    if not isinstance(e, ev.ToolCallSucceeded) or e.tool != "recall":
        return []
    found = e.result.get("memories", []) if isinstance(e.result, dict) else []
    return [
        RecalledMemory(str(m["memory_id"]), float(m["relevance"]), str(m["content"]))
        for m in found
        if isinstance(m, dict) and {"memory_id", "relevance", "content"} <= m.keys()
    ]
