"""A run in progress: the Run aggregate and what the driver tracks about it between steps."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from events import catalog as ev
from events.agent import Agent
from events.run import Run
from owlclaw.runtime.steps import RecordedSteps
from owlclaw.tools.tool import Tool

InFlight = asyncio.Future[tuple[Agent, list[int]]]
"""A commit submitted to the ledger thread: its (agent, positions) once stored."""


class Stop(Exception):
    """The run ends now with this end event (a limit, a budget, every model failing)."""

    def __init__(self, event: type[ev.RunEnded], **fields: Any):
        self.event = event
        self.fields = fields


class RunProgress:
    """What the runtime tracks of a run as it executes; its counters are the Run aggregate's."""

    def __init__(self, agent: Agent, run: Run, started: float, steps: RecordedSteps | None = None):
        self.started = started
        self.agent = agent
        self.run = run
        self.position = 0
        self.tools: dict[str, Tool] = {}
        self.hidden: dict[str, str] = {}
        self.seen: dict[tuple[str, str], int] = {}
        """How often each (tool, canonical arguments) was called in this run."""
        self.failing: tuple[str, str, int] | None = None
        """(tool, error code, count) of the failures in a row so far."""
        self.events: list[ev.LedgerEvent] = []
        """The run's events committed so far."""
        self.committed = run.version - len(run.pending_events)
        """The run stream's version in the ledger as far as this writer knows."""
        self.in_flight: tuple[list[ev.LedgerEvent], InFlight] | None = None
        """The commit not yet settled (awaited by the next one, so commits keep their order)."""
        self.lost_commit: str | None = None
        """Why a commit of this run failed for want of the database: what it carried is lost."""
        self.steps = steps or RecordedSteps()
        """Recorded steps served before the driver asks a model or runs a tool."""

    def totals(self) -> dict[str, Any]:
        """The end event's totals: the Run's own counters and the time since the run began."""
        run = self.run.state
        return {
            "iterations": run.llm_calls,
            "tool_calls": run.tool_calls,
            "tokens": run.tokens,
            "cost_usd": run.cost_usd,
            "duration_ms": round((time.perf_counter() - self.started) * 1000, 3),
        }
