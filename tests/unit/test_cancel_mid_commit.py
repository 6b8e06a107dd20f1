"""A run cancelled while one of its commits is in flight, and that commit then fails (another
writer appended to the agent's stream first): the run's stream keeps contiguous versions and
ends exactly once. Found in CI as a run stream [1, 2, 5] when a Ray host stood down and
cancelled its run mid-commit (in-memory ledger; the SQL append refuses the same gap)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.run import Run
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_a_run_cancelled_while_a_failing_commit_is_in_flight_leaves_no_gap() -> None:
    register_script(
        "cancel-mid-commit",
        [
            call("log_decision", reasoning="first", decision_type="other"),
            call("schedule_once", delay_seconds=60, focus="later"),  # an agent-stream fact
            call("log_decision", reasoning="second", decision_type="other"),
            {"content": "done"},
        ],
    )
    ledger = Ledger.in_memory()
    ledger.register_agent("contested")
    runtime = AgentRuntime(ledger, "contested", models=["scripted/cancel-mid-commit"])
    append = runtime.setup.writer.append
    in_flight, release = threading.Event(), threading.Event()
    commits = 0

    def second_commit_loses_to_a_rival(agent: Agent, *runs: Run, **kw: Any) -> Any:
        nonlocal commits
        commits += 1
        if commits > 1 and agent.pending_events and not in_flight.is_set():
            # the commit carrying the schedule: the run is cancelled meanwhile (its host stood
            # down), then the commit fails, as a rival queued a run on the agent's stream first
            in_flight.set()
            release.wait(10)
            rival = ledger.load_agent("contested")
            rival.queue_run(trigger="webhook")
            ledger.append(rival)
        return append(agent, *runs, **kw)

    runtime.setup.writer.append = second_commit_loses_to_a_rival  # type: ignore[method-assign]

    async def scenario() -> None:
        task = asyncio.create_task(runtime.run("webhook"))
        await asyncio.to_thread(in_flight.wait, 10)
        task.cancel()
        release.set()
        with contextlib.suppress(BaseException):
            await task

    asyncio.run(scenario())
    runtime.close()
    [queued, _] = [
        e for e in ledger.stream(ledger.load_agent("contested").id) if isinstance(e, ev.RunQueued)
    ]
    events = ledger.stream(queued.run_id)
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    ends = [e for e in events if isinstance(e, ev.RunEnded)]
    assert len(ends) == 1 and events[-1] is ends[0]
    assert any(isinstance(e, ev.ToolCallRequested) for e in events)  # the first commit stayed
