"""An OwlClaw run as an A2A task state, read from the run's own events (the ledger is the only
task store): queued is submitted; running, interrupted (it resumes) or parked for a sub-agent is
working; parked for a person's approval is input-required; its end event decides the rest."""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import TaskState

from events import catalog as ev

CANCELLED = "cancelled"
"""The reason of the RunTerminated a ``Cancel`` records."""

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def task_state(events: Sequence[ev.LedgerEvent]) -> TaskState:
    """The A2A state of a run whose run stream holds ``events`` (none yet: it is queued)."""
    state: TaskState = TaskState.TASK_STATE_SUBMITTED
    for event in events:
        match event:
            case ev.RunParked(approval_id=approval) if approval:
                state = TaskState.TASK_STATE_INPUT_REQUIRED
            case ev.RunStarted() | ev.RunResumed() | ev.RunParked() | ev.RunInterrupted():
                state = TaskState.TASK_STATE_WORKING
            case ev.RunCompleted():
                state = TaskState.TASK_STATE_COMPLETED
            case ev.RunTerminated(reason=reason) if reason == CANCELLED:
                state = TaskState.TASK_STATE_CANCELED
            case ev.RunSkipped():
                state = TaskState.TASK_STATE_REJECTED
            case ev.RunFailed() | ev.RunTimedOut() | ev.RunTerminated():
                state = TaskState.TASK_STATE_FAILED
    return state


def status_text(events: Sequence[ev.LedgerEvent]) -> str:
    """What the task's status message says: the answer, or why the run did not give one."""
    for event in reversed(events):
        match event:
            case ev.RunCompleted(answer=answer):
                return answer
            case ev.RunFailed(error=why) | ev.RunTerminated(reason=why) | ev.RunSkipped(reason=why):
                return why
            case ev.RunTimedOut(timeout_s=limit):
                return f"the run took longer than its {limit:g} s limit"
            case ev.RunParked(approval_id=approval) if approval:
                return f"waiting for a person's answer to approval {approval}"
            case ev.RunResumed() | ev.RunStarted():
                return ""
    return ""


def state_name(state: TaskState) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``, as A2A's JSON names it."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")
