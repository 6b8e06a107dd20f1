"""How a run is carried out: live (tools execute, what it records is committed) or as a replay
of a recorded run for audit (tools return their recorded outcomes, nothing is committed: the
events are collected instead). The runtime asks its mode; it checks no replay flag.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from events import catalog as ev
from events.aggregates import Agent, Approval, Run
from owlclaw.llm.replay import RecordedRun, told_error
from owlclaw.tools.errors import Stopped
from owlclaw.tools.executor import LiveExecution, Settled, ToolLimits, encode_told, truncate
from owlclaw.tools.tool import Tool, ToolContext

HEADER_FIELDS = frozenset({"originator_id", "originator_version", "timestamp", "call_id", "tool"})


class Live(LiveExecution):
    """A run as it happens."""

    observes_world = True
    """Memory recall, budgets and the app directory are read (a replay must not depend on
    them)."""

    def commits(self) -> bool:
        return True

    def unknown_tools(self, known: Iterable[str]) -> list[str]:
        return []

    def collect(self, events: list[ev.LedgerEvent]) -> None:
        raise AssertionError("a live run commits its events")


class Replay:
    """A recorded run re-executed: the recorded outcome of each call, nothing committed."""

    observes_world = False

    def __init__(self, recorded: RecordedRun):
        self.recorded = recorded
        self.produced: list[ev.LedgerEvent] = []
        """The events the run would have written, in order."""
        self._executed: dict[str, int] = {}
        """How often each call was executed so far (a resumed run may execute one again)."""

    def commits(self) -> bool:
        return False

    def collect(self, events: list[ev.LedgerEvent]) -> None:
        self.produced += events

    def unknown_tools(self, known: Iterable[str]) -> list[str]:
        """Capabilities the recording saw that this process does not load."""
        return self.recorded.unknown_tools(known)

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
