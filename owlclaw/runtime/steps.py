"""Recorded steps served to the run driver before it asks a model or runs a tool: one source
for resume and for audit replay.

Resume drives the recorded run itself: its recorded steps are in its stream, so the driver goes
through them without recording them again and then goes on live. Audit replay drives a new run
primed with every step of the recorded one: each step it is served is recorded on that run (to be
compared with the record), tools settle with their recorded outcomes (``RecordedOutcomes``) and
asking the model past the recording is a divergence that fails the run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import msgspec

from events import catalog as ev
from events.agent import Agent
from events.agent_state import Approval
from events.run import Run
from owlclaw.runtime.recorded import RecordedRun, told_error
from owlclaw.tools.encoding import encode_told, json_safe, truncate
from owlclaw.tools.errors import Stopped, ToolError
from owlclaw.tools.executor import Settled, ToolLimits
from owlclaw.tools.tool import Tool, ToolContext

HEADER_FIELDS = frozenset({"originator_id", "originator_version", "timestamp", "call_id", "tool"})
ZERO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


class ReplayExhausted(RuntimeError):
    """The re-executed run asked the model for more responses than were recorded."""


class RecordedSteps:
    """The model responses and tool outcomes a run recorded, in order (none for a fresh run)."""

    def __init__(self, recorded: RecordedRun | None = None):
        self.recorded = recorded
        self._responses: deque[dict[str, Any]] = deque(recorded.messages if recorded else ())

    def own(self, run: Run) -> bool:
        """Whether ``run`` is the recorded run itself (resumed): its steps are in its stream."""
        return self.recorded is not None and self.recorded.run_id == run.id

    def response(self, run: Run, inputs: dict[str, Any]) -> dict[str, Any] | None:
        """The next recorded model response, recorded on a run other than the recorded one;
        None when the run goes on with the model."""
        if self.recorded is None:
            return None
        if not self._responses:
            if self.own(run):
                return None
            raise ReplayExhausted(
                f"run {self.recorded.run_id} recorded {len(self.recorded.messages)} model"
                f" responses; the replay asked for response {len(self.recorded.messages) + 1}"
            )
        message = self._responses.popleft()
        if not self.own(run):
            model = f"replay/{self.recorded.run_id}"
            run.record(
                ev.LLMResponded, model=model, message=message, usage=ZERO_USAGE, inputs=inputs
            )
            copy: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(message))
            return copy
        return message

    def told(self, run: Run, call_id: str) -> Settled | None:
        """What the resumed run recorded it told the model of a call (not repeated)."""
        if not self.own(run):
            return None
        assert self.recorded is not None
        settled = self.recorded.settled(call_id)
        if isinstance(settled, ToolError):  # recorded before the stop: not repeated
            return Settled(ev.ToolCallFailed, {}, encode_told(settled), settled.error_code)
        if settled is not None:
            return Settled(ev.ToolCallSucceeded, {}, json_safe(settled).decode())
        return None

    def requested(self, run: Run, call_id: str) -> dict[str, Any] | None:
        """The arguments of a call the resumed run requested before its process stopped."""
        return self.recorded.arguments(call_id) if self.own(run) and self.recorded else None

    def unknown_tools(self, run: Run, known: Iterable[str]) -> list[str]:
        """For a replay: the capabilities the recording saw that this process does not load."""
        if self.recorded is None or self.own(run):
            return []
        return self.recorded.unknown_tools(known)


class RecordedOutcomes:
    """How an audit replay's tools settle: with the recorded outcome of each execution."""

    def __init__(self, recorded: RecordedRun):
        self.recorded = recorded
        self._executed: dict[str, int] = {}
        """How often each call was executed so far (a resumed run may execute one again)."""

    def recorded_arguments(self, call_id: str) -> dict[str, Any] | None:
        return self.recorded.arguments(call_id)

    def approval(self, agent: Agent, run: Run, call_id: str) -> Approval | None:
        """The answer the agent recorded for the recorded run's call (the replay's own run
        is a new one)."""
        return agent.approval_for(self.recorded.run_id, call_id)

    async def settle(
        self, tool: Tool | None, params: Any, ctx: ToolContext, limits: ToolLimits
    ) -> Settled:
        """The recorded outcome event of this execution of the call again (as recorded);
        ``Stopped`` where the recorded run's process stopped while it ran; or a failure saying
        what the recording has instead."""
        attempt = self._executed.get(ctx.call_id, 0)
        self._executed[ctx.call_id] = attempt + 1
        executions = self.recorded.executions(ctx.call_id)
        if attempt < len(executions):
            event = executions[attempt]
            if event is None:
                raise Stopped(msgspec.to_builtins(params))
        else:
            event = self.recorded.outcome_event(ctx.call_id)
        if isinstance(event, ev.ToolCallSucceeded):
            limit = (tool.spec.max_result_bytes if tool else None) or limits.result_bytes
            told = truncate(msgspec.json.encode(event.result), limit)[0]
            return Settled(type(event), _fields(event), told)
        if isinstance(event, ev.ToolCallFailed | ev.ToolCallTimedOut):
            error = told_error(event)
            assert error is not None
            return Settled(type(event), _fields(event), encode_told(error), error.error_code)
        error = self.recorded.outcome(ctx.call_id)  # the record did not execute the call
        fields = {
            "error": error.error,
            "error_code": error.error_code,
            "retryable": error.retryable,
        }
        return Settled(ev.ToolCallFailed, fields, encode_told(error), error.error_code)


def _fields(event: ev.LedgerEvent) -> dict[str, Any]:
    return {f: getattr(event, f) for f in event.__struct_fields__ if f not in HEADER_FIELDS}
