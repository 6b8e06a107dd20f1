"""A run in progress: the Run aggregate and what the loop tracks about it between steps."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from events import catalog as ev
from events.aggregates import Agent, Run
from owlclaw.llm.replay import RecordedRun
from owlclaw.tools.tool import Tool

InFlight = asyncio.Future[tuple[Agent, list[int]]]
"""A commit submitted to the ledger thread: its (agent, positions) once stored."""


class RunProgress:
    """What the runtime tracks of a run as it executes; its counters are the Run aggregate's."""

    def __init__(self, agent: Agent, run: Run, started: float):
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
        self.resumed: RecordedRun | None = None
        """For a resumed run: what it recorded before its process stopped."""
        self.replaying: deque[dict[str, Any]] = deque()
        """Recorded model responses still to serve before asking a model again."""

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
