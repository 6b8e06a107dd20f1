"""The Run aggregate: one stream per run, from RunStarted to its one end event.

Its own module because a run's state is counted from its own events only (calls, tokens,
status), independent of the Agent stream that queued it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

import msgspec

from events import catalog as ev
from events.aggregate import Aggregate, Handler
from events.catalog import LedgerEvent, Stream


class RunState(msgspec.Struct):
    agent_id: str = ""
    run_no: int = 0
    trigger: str = ""
    focus: str | None = None
    inbound: list[int] = []
    """Agent-stream versions of the inbound events this run was given (a heartbeat's)."""
    started_at: datetime | None = None
    status: str = "pending"
    llm_calls: int = 0
    tool_calls: int = 0
    """Calls that passed validation and governance (ToolCallRequested)."""
    calls_made: int = 0
    """Every call the model made, whatever its outcome (requested, denied, rejected): what
    the run's function-call limit counts."""
    tokens: int = 0
    cost_usd: float = 0.0
    open_calls: dict[str, str] = {}
    """call_id -> tool for requested calls with no recorded outcome yet."""
    requested: list[str] = []
    """Every requested call's id: a granted approval executes its call once."""
    tools_called: list[str] = []
    plan: list[dict[str, str]] = []
    """The run's current plan (its last PlanUpdated): items of text and status."""
    ended: bool = False
    duration_ms: float = 0.0


class Run(Aggregate):
    stream: ClassVar[Stream] = "run"
    state: RunState

    def __init__(self, stream_id: UUID, state: RunState, version: int = 0):
        super().__init__(stream_id, state, version)
        self.head: tuple[int, bytes] | None = None
        """(version, hash) of this stream's last event as this process committed it (the ledger
        sets it): sealing the run needs that hash, which it need not read back then. None:
        not known here (a run loaded from the ledger)."""

    @classmethod
    def blank(cls, stream_id: UUID) -> Run:
        return cls(stream_id, RunState())

    @classmethod
    def start(cls, agent_id: str, queued: ev.RunQueued) -> Run:
        """The run a RunQueued accepted, with its RunStarted pending."""
        run = cls.blank(queued.run_id)
        run.record(
            ev.RunStarted,
            agent_id=agent_id,
            run_no=queued.run_no,
            trigger=queued.trigger,
            focus=queued.focus,
            payload=dict(queued.payload),
            context=dict(queued.context),
            inbound=list(queued.inbound),
        )
        return run

    def end(self, outcome: type[ev.RunEnded], **fields: Any) -> ev.LedgerEvent:
        """Record the run's one end event; a second end is a bug, refused."""
        if self.state.ended or any(isinstance(e, ev.RunEnded) for e in self._pending):
            raise RuntimeError(f"run {self.id} already ended ({self.state.status})")
        return self.record(outcome, **fields)

    def _on_RunStarted(self, e: ev.RunStarted) -> None:
        self.state.agent_id = e.agent_id
        self.state.run_no = e.run_no
        self.state.trigger = e.trigger
        self.state.focus = e.focus
        self.state.started_at = e.timestamp
        self.state.status = "running"
        self.state.inbound = list(e.inbound)

    def _on_LLMResponded(self, e: ev.LLMResponded) -> None:
        self.state.llm_calls += 1
        self.state.tokens += e.usage.get("total_tokens", 0)
        self.state.cost_usd += e.cost_usd

    def _on_ToolCallRequested(self, e: ev.ToolCallRequested) -> None:
        self.state.tool_calls += 1
        self.state.calls_made += 1
        self.state.open_calls[e.call_id] = e.tool
        self.state.requested.append(e.call_id)
        self.state.tools_called.append(e.tool)

    def _close_call(self, e: Any) -> None:
        self.state.open_calls.pop(e.call_id, None)

    def _refuse_call(self, e: ev.ToolCallDenied | ev.ToolCallRejected) -> None:
        """A call refused before it was requested still counts toward the limit."""
        self.state.calls_made += 1

    def _on_PlanUpdated(self, e: ev.PlanUpdated) -> None:
        """An erased plan (its key destroyed) reads as no plan."""
        self.state.plan = list(e.items) if isinstance(e.items, list) else []

    def _on_RunParked(self, e: ev.RunParked) -> None:
        self.state.status = "parked"

    def _on_SubAgentCharged(self, e: ev.SubAgentCharged) -> None:
        self.state.tokens += e.tokens
        self.state.cost_usd += e.cost_usd

    def _on_RunInterrupted(self, e: ev.RunInterrupted) -> None:
        self.state.status = "interrupted"

    def _on_RunResumed(self, e: ev.RunResumed) -> None:
        self.state.status = "running"

    def _end(self, e: ev.RunEnded) -> None:
        self.state.status = type(e).__name__.removeprefix("Run").lower()
        self.state.ended = True
        self.state.duration_ms = e.duration_ms

    handlers: ClassVar[Mapping[type[LedgerEvent], Handler]] = {
        ev.RunStarted: _on_RunStarted,
        ev.LLMResponded: _on_LLMResponded,
        ev.ToolCallRequested: _on_ToolCallRequested,
        ev.ToolCallDenied: _refuse_call,
        ev.ToolCallRejected: _refuse_call,
        ev.ToolCallSucceeded: _close_call,
        ev.ToolCallFailed: _close_call,
        ev.ToolCallTimedOut: _close_call,
        ev.ToolOutcomeUnknown: _close_call,
        ev.PlanUpdated: _on_PlanUpdated,
        ev.RunParked: _on_RunParked,
        ev.SubAgentCharged: _on_SubAgentCharged,
        ev.RunInterrupted: _on_RunInterrupted,
        ev.RunResumed: _on_RunResumed,
        ev.RunCompleted: _end,
        ev.RunFailed: _end,
        ev.RunTimedOut: _end,
        ev.RunTerminated: _end,
        ev.RunSkipped: _end,
    }
    ignored: ClassVar[frozenset[type[LedgerEvent]]] = frozenset(
        {
            ev.VisibleToolsResolved,
            ev.DecisionLogged,
            ev.RunWarning,
            ev.MemoryRemembered,
            ev.MessageSent,
        }
    )
