"""Runs appended straight to the ledger (no runtime, no model): input for the views."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.run import Run


def record_runs(ledger: Ledger, agent: Agent, count: int, tools_per_run: int = 2) -> None:
    for n in range(count):
        run = Run.start(agent.agent_id, agent.queue_run(trigger="heartbeat", focus=f"run {n}"))
        for k in range(tools_per_run):
            run.record(
                ev.LLMResponded,
                model="scripted/t",
                message={"k": k},
                usage={"total_tokens": 10},
                cost_usd=0.001,
            )
            run.record(
                ev.ToolCallRequested,
                call_id=f"c{k}",
                tool="recall",
                arguments={"query": f"q{n}.{k}"},
            )
            run.record(
                ev.ToolCallSucceeded,
                call_id=f"c{k}",
                tool="recall",
                result={"hits": k},
                duration_ms=1.0,
            )
        run.record(ev.RunCompleted, iterations=tools_per_run, tool_calls=tools_per_run)
        ledger.append(agent, run)


def remember(
    ledger: Ledger, agent: Agent, contents: Sequence[str], tags: Sequence[str] = ()
) -> int:
    run = Run.start(agent.agent_id, agent.queue_run(trigger="webhook"))
    for content in contents:
        run.record(
            ev.MemoryRemembered,
            agent_id=agent.agent_id,
            memory_id=uuid.uuid4(),
            content=content,
            tags=list(tags),
        )
    return ledger.append(agent, run)[-1]


def tomorrow() -> str:
    """The day after today, read when a command runs: an archive bound past every run recorded
    so far (a constant taken at import went stale when the suite crossed midnight)."""
    return (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
