"""Re-execute a recorded run for audit and report whether the same steps follow.

The replay model serves the recorded responses and tools return their recorded outcomes, so
what is checked is everything OwlClaw itself decides: tool visibility, argument validation,
governance, limits, the order of calls and how the run ends. Nothing is written to the ledger.
Like Temporal's replayer, a difference means today's code or configuration would not reproduce
the recorded run from the same model output.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from events import Ledger
from events import catalog as ev
from events.aggregates import run_stream_id
from owlclaw.app import AgentApp
from owlclaw.config import RuntimeConfig
from owlclaw.llm.replay import RecordedRun, register_recording
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.governance import Governance
from owlclaw.runtime.loop import AgentRuntime

EFFECTS = (ev.DecisionLogged, ev.MemoryRemembered, ev.MessageSent, ev.RunWarning, ev.RunStarted)
"""Events a tool's execution or the environment writes: taken from the record, not compared."""
PAUSES = (ev.RunParked, ev.RunInterrupted, ev.RunResumed)
"""Where a run stopped and went on (an approval, a crash): the replay runs straight through,
deciding each parked call with the answer the agent recorded, and a call the process stopped in
as the resumed run did (``Stopped``): its outcome unknown, the call run again only if that is
safe."""


@dataclass
class ReplayReport:
    agent_id: str
    run_no: int
    run_id: str
    matched: bool
    compared: int
    differences: list[str] = field(default_factory=list)


def fingerprint(event: ev.LedgerEvent) -> tuple[Any, ...]:  # noqa: PLR0911 - one per type
    """What must be equal for two runs to have taken the same step."""
    match event:
        case ev.LLMResponded(message=message):
            calls = [
                (c["function"]["name"], c["function"].get("arguments"))
                for c in message.get("tool_calls") or []
            ]
            return ("LLMResponded", message.get("content"), calls)
        case ev.VisibleToolsResolved(tools=tools, filtered=filtered):
            return ("VisibleToolsResolved", sorted(tools), sorted(filtered.items()))
        case ev.ToolCallRequested(tool=tool, arguments=arguments):
            return ("ToolCallRequested", tool, arguments)
        case ev.ToolCallDenied(tool=tool, reason=reason):
            return ("ToolCallDenied", tool, reason)
        case ev.ToolCallRejected(tool=tool, error=error):
            return ("ToolCallRejected", tool, error)
        case ev.ToolCallSucceeded(tool=tool, result=result):
            return ("ToolCallSucceeded", tool, result)
        case ev.ToolCallFailed(tool=tool, error_code=code):
            return ("ToolCallFailed", tool, code)
        case ev.ToolCallTimedOut(tool=tool) | ev.ToolOutcomeUnknown(tool=tool):
            return (type(event).__name__, tool)
        case ev.RunCompleted(answer=answer):
            return ("RunCompleted", answer)
        case ev.RunTerminated(reason=reason):
            return ("RunTerminated", reason)
    return (type(event).__name__,)


def _steps(events: list[ev.LedgerEvent]) -> list[tuple[Any, ...]]:
    return [
        fingerprint(e) for e in events if e.stream == "run" and not isinstance(e, EFFECTS + PAUSES)
    ]


def replay_run(
    ledger: Ledger,
    agent_id: str,
    run_no: int,
    *,
    app: AgentApp | None = None,
    registry: Registry | None = None,
    limits: RuntimeConfig | None = None,
    governance: Governance | None = None,
) -> ReplayReport:
    """Re-execute run ``run_no`` of ``agent_id`` with the replay model and compare its steps."""
    run_id = run_stream_id(agent_id, run_no)
    recorded = RecordedRun(run_id, ledger.stream(run_id))
    runtime = AgentRuntime(
        ledger,
        agent_id,
        models=[register_recording(recorded)],
        app=app,
        registry=registry,
        limits=limits,
        governance=governance,
        replay=recorded,
    )
    start = recorded.started
    try:
        asyncio.run(
            runtime.run(start.trigger, start.focus, dict(start.payload), dict(start.context))
        )
    finally:
        runtime.close()
    expected, got = _steps(list(recorded.events)), _steps(runtime.produced)
    differences = [
        f"step {i + 1}: recorded {a!r}, replay {b!r}"
        for i, (a, b) in enumerate(zip(expected, got, strict=False))
        if a != b
    ]
    if len(expected) != len(got):
        differences.append(f"recorded {len(expected)} steps, replay produced {len(got)}")
    return ReplayReport(
        agent_id=agent_id,
        run_no=run_no,
        run_id=str(run_id),
        matched=not differences,
        compared=len(expected),
        differences=differences,
    )
