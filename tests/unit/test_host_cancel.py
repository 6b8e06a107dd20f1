"""Cancelling a run while it is still being prepared (before it recorded anything): it still
ends exactly once, and the mailbox goes on (in-process host, in-memory ledger)."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from actors.host import AgentHost
from events import Agent, Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.loop import AgentRuntime, RunResult


def test_a_run_cancelled_while_it_is_prepared_ends_once_and_the_next_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register_script("cancel-early", [{"content": "done"}])
    ledger = Ledger.in_memory()
    ledger.register_agent("early")
    config = OwlClawConfig(runtime=RuntimeConfig(models=("scripted/cancel-early",)))
    prepared = AgentRuntime._prepare_agent
    run_queued = AgentRuntime.run_queued
    starting: list[bool] = []
    held, release = threading.Event(), threading.Event()

    async def marked(runtime: AgentRuntime, queued: ev.RunQueued) -> RunResult:
        starting.append(True)
        return await run_queued(runtime, queued)

    def held_when_the_run_starts(runtime: AgentRuntime) -> Agent:
        if starting and not held.is_set():  # the run prepares its agent: hold it there
            held.set()
            release.wait(10)
        return prepared(runtime)

    monkeypatch.setattr(AgentRuntime, "run_queued", marked)
    monkeypatch.setattr(AgentRuntime, "_prepare_agent", held_when_the_run_starts)

    async def scenario() -> tuple[bool, str, str, str]:
        host = AgentHost(ledger, config)
        first = await host.submit("early", "webhook")
        await asyncio.to_thread(held.wait, 10)
        cancelled = await host.cancel("early", first)
        release.set()
        ended = await host.result("early", first)
        second = await host.submit("early", "webhook")
        results = ended, await host.result("early", second)
        await host.close()
        return cancelled, first, results[0].status, results[1].status

    cancelled, first, first_status, second_status = asyncio.run(scenario())
    assert cancelled and (first_status, second_status) == ("terminated", "completed")
    events = ledger.stream(uuid.UUID(first))
    assert [type(e) for e in events] == [ev.RunStarted, ev.RunTerminated]
    assert isinstance(events[-1], ev.RunTerminated) and events[-1].reason == "cancelled"
