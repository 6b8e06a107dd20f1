"""An A2A ``Task`` read from a run's events: the task id is the run id, its context id is the
one the caller gave (kept in the run's context under ``a2a``), its status follows the run
(``owlclaw.a2a.states``) and a completed run's answer is its one artifact."""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus

from events import catalog as ev
from owlclaw.a2a.states import status_text, task_state

CONTEXT_KEY = "a2a"
"""Where a run started over A2A keeps the caller's ``context_id`` and ``message_id``."""
ANSWER = "answer"


def caller_context(events: Sequence[ev.LedgerEvent]) -> dict[str, str]:
    """What the run's context records of the A2A call that started it (empty: not started by
    A2A, or not started yet)."""
    if events and isinstance(events[0], ev.RunStarted):
        found = events[0].context.get(CONTEXT_KEY)
        if isinstance(found, dict):
            return {k: v for k, v in found.items() if isinstance(v, str)}
    return {}


def run_task(run_id: str, events: Sequence[ev.LedgerEvent], context_id: str = "") -> Task:
    """The task of the run ``run_id`` whose stream holds ``events``; ``context_id`` for a run
    not started yet (its RunStarted is what records the caller's)."""
    context_id = caller_context(events).get("context_id", context_id) or run_id
    state = task_state(events)
    text = status_text(events)
    status = TaskStatus(state=state)
    if text:
        status.message.CopyFrom(
            Message(
                message_id=f"{run_id}:status:{len(events)}",
                context_id=context_id,
                task_id=run_id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=text)],
            )
        )
    task = Task(id=run_id, context_id=context_id, status=status)
    if state == TaskState.TASK_STATE_COMPLETED:
        task.artifacts.append(answer_artifact(text))
    if events and isinstance(events[0], ev.RunStarted) and events[0].focus:
        task.history.append(
            Message(
                message_id=caller_context(events).get("message_id", f"{run_id}:focus"),
                context_id=context_id,
                task_id=run_id,
                role=Role.ROLE_USER,
                parts=[Part(text=events[0].focus)],
            )
        )
    return task


def answer_artifact(answer: str) -> Artifact:
    return Artifact(artifact_id=ANSWER, name=ANSWER, parts=[Part(text=answer)])
