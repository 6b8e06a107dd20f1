"""Cancelling a run while it is still being prepared (before it recorded anything): it still
ends exactly once, and the mailbox goes on (in-process host, in-memory ledger)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from actors.host import AgentHost
from events import Agent, Ledger, Run
from events import catalog as ev
from events.streams import agent_stream_id
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Cancel, Result, RunResult, Submit
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.agent_setup import AgentSetup
from owlclaw.runtime.fencing import AgentWriter
from owlclaw.tools.subagents import SubAgents
from tests.apps import make_app
from tests.scripted import call


def test_a_run_cancelled_while_it_is_prepared_ends_once_and_the_next_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register_script("cancel-early", [{"content": "done"}])
    ledger = Ledger.in_memory()
    ledger.register_agent("early")
    config = OwlClawConfig(runtime=RuntimeConfig(models=("scripted/cancel-early",)))
    prepared = AgentSetup.prepare
    run_queued = AgentRuntime.run_queued
    starting: list[bool] = []
    held, release = threading.Event(), threading.Event()

    async def marked(runtime: AgentRuntime, queued: ev.RunQueued) -> RunResult:
        starting.append(True)
        return await run_queued(runtime, queued)

    def held_when_the_run_starts(setup: AgentSetup) -> Agent:
        if starting and not held.is_set():  # the run prepares its agent: hold it there
            held.set()
            release.wait(10)
        return prepared(setup)

    monkeypatch.setattr(AgentRuntime, "run_queued", marked)
    monkeypatch.setattr(AgentSetup, "prepare", held_when_the_run_starts)

    async def scenario() -> tuple[bool, str, str, str]:
        host = AgentHost(ledger, config)
        first = await host.ask(Submit(agent_id="early", trigger="webhook"))
        await asyncio.to_thread(held.wait, 10)
        cancelled = await host.ask(Cancel(agent_id="early", run_id=first))
        release.set()
        ended = await host.ask(Result(agent_id="early", run_id=first))
        second = await host.ask(Submit(agent_id="early", trigger="webhook"))
        results = ended, await host.ask(Result(agent_id="early", run_id=second))
        await host.close()
        return cancelled, first, results[0].status, results[1].status

    cancelled, first, first_status, second_status = asyncio.run(scenario())
    assert cancelled and (first_status, second_status) == ("terminated", "completed")
    events = ledger.stream(uuid.UUID(first))
    assert [type(e) for e in events] == [ev.RunStarted, ev.RunTerminated]
    assert isinstance(events[-1], ev.RunTerminated) and events[-1].reason == "cancelled"


def test_cancelling_a_parent_inside_its_last_spawn_cancels_that_child_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel reaches the parent after its second child started but before the parent
    committed that SubAgentSpawned (its end commit carries it, slowly): the cascade still
    cancels both children (it read the spawns before that commit, and missed the second)."""
    root = make_app(
        tmp_path / "hasty",
        config='[agent]\nmodels = ["scripted/hasty"]\n[tools]\nenable = ["spawn_agent"]\n',
    )
    make_app(root / "subagents" / "slow", config='[agent]\nmodels = ["scripted/slow"]\n')
    spawns = [call("spawn_agent", task=f"t{i}", profile="slow") for i in (1, 2)]
    register_script("hasty", [{"tool_calls": spawns}])
    register_script("slow", {"steps": [{"content": "late"}], "latency_s": 60})
    ledger = Ledger.in_memory()
    ledger.attach_app("hasty", str(root))
    checks: list[uuid.UUID] = []
    ended, append = SubAgents.ended, AgentWriter.append

    async def second_check_waits(self: SubAgents, child_run_id: uuid.UUID) -> Any:
        checks.append(child_run_id)
        if len(checks) == 2:  # the parent checks on its second child: cancelled in here
            await asyncio.Event().wait()
        return await ended(self, child_run_id)

    def slow_end(self: AgentWriter, agent: Agent, *runs: Run, **kwargs: Any) -> Any:
        if agent.id == agent_stream_id("hasty") and any(
            isinstance(e, ev.RunEnded) for run in runs for e in run.pending_events
        ):
            time.sleep(0.3)  # the parent's end commit, with the second SubAgentSpawned
        return append(self, agent, *runs, **kwargs)

    monkeypatch.setattr(SubAgents, "ended", second_check_waits)
    monkeypatch.setattr(AgentWriter, "append", slow_end)

    def ended_runs(runs: list[uuid.UUID]) -> list[bool]:
        return [any(isinstance(e, ev.RunEnded) for e in ledger.stream(r)) for r in runs]

    async def go() -> tuple[list[uuid.UUID], list[bool]]:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
        try:
            run_id = await host.ask(Submit(agent_id="hasty", trigger="webhook"))
            while len(checks) < 2:
                await asyncio.sleep(0.01)
            assert await host.ask(Cancel(agent_id="hasty", run_id=run_id))
            runs = [s.child_run_id for s in ledger.load_agent("hasty").state.spawns.values()]
            deadline = time.monotonic() + 10
            while not all(ended_runs(runs)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return runs, ended_runs(runs)
        finally:
            await host.close()

    runs, done = asyncio.run(go())
    assert len(runs) == 2 and done == [True, True]
