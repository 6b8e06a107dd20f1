"""A run as its ledger stream recorded it: its start, model responses and tool outcomes, read
by resume and by audit replay (``steps.RecordedSteps`` serves them to the run driver)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

from events import catalog as ev
from owlclaw.tools.errors import ToolError

EXECUTION_OUTCOMES = (ev.ToolCallSucceeded, ev.ToolCallFailed, ev.ToolCallTimedOut)
"""The events that end an execution of a tool."""
OTHER_STEPS = (
    ev.LLMResponded,
    ev.ToolCallRequested,
    ev.ToolOutcomeUnknown,
    ev.ToolCallDenied,
    ev.ToolCallRejected,
)
"""Events of a step other than a call's execution (when they are of another call)."""


@dataclass
class RecordedRun:
    """A recorded run as replay needs it: its start, model responses and tool outcomes."""

    run_id: UUID
    events: Sequence[ev.LedgerEvent]
    started: ev.RunStarted = field(init=False)
    messages: list[dict[str, Any]] = field(init=False)
    visible: list[str] = field(init=False)

    def __post_init__(self) -> None:
        starts = [e for e in self.events if isinstance(e, ev.RunStarted)]
        if not starts:
            raise ValueError(f"run {self.run_id} has no RunStarted event")
        self.started = starts[0]
        self.messages = [e.message for e in self.events if isinstance(e, ev.LLMResponded)]
        self.visible = next(
            (e.tools for e in self.events if isinstance(e, ev.VisibleToolsResolved)), []
        )

    def arguments(self, call_id: str) -> dict[str, Any] | None:
        for e in self.events:
            if isinstance(e, ev.ToolCallRequested) and e.call_id == call_id:
                return dict(e.arguments)
        return None

    def waited_at(self, call_id: str) -> bool:
        """The run parked at this call, after requesting it, waiting for a sub-agent or for
        another agent's reply."""
        return any(
            isinstance(e, ev.RunParked) and e.call_id == call_id and (e.spawn_id or e.message_id)
            for e in self.events
        )

    def outcome(self, call_id: str) -> Any:
        """The recorded result (or structured error) of a tool call."""
        settled = self.settled(call_id)
        if settled is None:
            return ToolError(
                error=f"no outcome of call {call_id} was recorded",
                error_code="NO_RECORDED_OUTCOME",
            )
        return settled

    def outcome_event(self, call_id: str) -> ev.LedgerEvent | None:
        """The event that settled a call, if the run recorded one."""
        for e in self.events:
            if getattr(e, "call_id", None) == call_id and isinstance(e, ev.CALL_SETTLING_EVENTS):
                return e
        return None

    def executions(self, call_id: str) -> list[ev.LedgerEvent | None]:
        """What became of each execution of a call, in order: the event of its outcome
        (ToolCallSucceeded, ToolCallFailed, ToolCallTimedOut), or None where the process
        stopped while it ran (a RunInterrupted before its outcome).

        An execution begins with the call's request. After a stop the resumed run may execute
        the call again (after recording its ToolOutcomeUnknown, or at once for a call that had
        parked): it did if the call's outcome follows before any other step; calls execute one
        at a time."""
        found: list[ev.LedgerEvent | None] = []
        running: Literal["requested", "again", None] = None
        for e in self.events:
            ours = getattr(e, "call_id", None) == call_id
            if isinstance(e, ev.RunInterrupted):
                if running:
                    found.append(None)
                    running = "again"
            elif ours and isinstance(e, ev.ToolCallRequested):
                running = "requested"
            elif ours and isinstance(e, ev.ToolOutcomeUnknown):
                continue  # recorded as the resumed run reached the call: it may run again
            elif ours and isinstance(e, EXECUTION_OUTCOMES):
                if running:
                    found.append(e)
                running = None
            elif isinstance(e, ev.RunEnded) or (running == "again" and isinstance(e, OTHER_STEPS)):
                running = None
        return found

    def settled(self, call_id: str) -> Any | None:
        """What the model was told about a call, if the run recorded it; None if not."""
        for e in self.events:
            if getattr(e, "call_id", None) != call_id:
                continue
            if isinstance(e, ev.ToolCallSucceeded):
                return e.result
            if (told := told_error(e)) is not None:
                return told
        return None

    def unknown_tools(self, known: Iterable[str]) -> list[str]:
        """Tools the recording saw that this process does not load (business capabilities)."""
        known = set(known)
        return [name for name in self.visible if name not in known]


def told_error(e: ev.LedgerEvent) -> ToolError | None:
    """The structured error the model was told of a call that this event settled unsuccessfully
    (None for any other event)."""
    match e:
        case ev.ToolCallFailed(error=error, error_code=code, retryable=retryable):
            return ToolError(error=error, error_code=code, retryable=retryable)
        case ev.ToolCallTimedOut(tool=tool, timeout_s=timeout_s):
            return ToolError(
                error=f"{tool} did not finish within {timeout_s:g} s",
                error_code="TIMEOUT",
                kind="timeout",
            )
        case ev.ToolCallDenied(reason=reason, error_code=code):
            code = code or "TOOL_DENIED"
            return ToolError(error=reason, error_code=code, retryable=code == "RATE_LIMITED")
        case ev.ToolCallRejected(error=error):
            return ToolError(error=error, error_code="INVALID_ARGUMENTS")
        case ev.ToolOutcomeUnknown(reason=reason):
            return ToolError(error=reason, error_code="OUTCOME_UNKNOWN")
    return None
