"""A run cancelled while its park commits: the host stopping leaves the durable park alone (the
run waits for its answer on the next host), a Cancel ends it, as its sender's when named.

CI94 caught the first: a host closed right after a run's RunParked was stored, the cancel landed
while the park's commit was still returning, and the run was ended as "terminated" after it had
parked, so the answer given on a new host found a finished run. The project's CI caught the
second: a Cancel naming nobody (a parent cancelled as it parked waiting for its sub-agents) was
taken for the host stopping, so the parent never ended."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from uuid import UUID

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.scripted import call

ASK = {"tool_calls": [call("ask_human", question="Sell ACME?", options=["hold", "sell"])]}


def held_park(ledger: Ledger) -> tuple[threading.Event, threading.Event, list[UUID]]:
    """Hold the commit that stores RunParked in the ledger thread: (entered, release, the
    parking run's id once entered)."""
    entered, release, parking = threading.Event(), threading.Event(), []
    append = ledger.append_rebasing

    def holding(*aggregates: Any, **kwargs: Any) -> Any:
        for agg in aggregates:
            if any(isinstance(e, ev.RunParked) for e in agg.pending_events):
                parking.append(agg.id)
                entered.set()
                release.wait(timeout=60)
        return append(*aggregates, **kwargs)

    ledger.append_rebasing = holding  # type: ignore[method-assign]
    return entered, release, parking


def cancel_while_parking(
    ledger: Ledger, by: str | None, *, told: bool = True
) -> list[ev.LedgerEvent]:
    """Run an agent to its ask_human, cancel its task while the park commits; its run's events.
    ``told``: a Cancel tells the runtime first, the host stopping cancels the task alone."""
    runtime = AgentRuntime(ledger, "asker", models=["scripted/cancel-park"])
    register_script("cancel-park", [ASK, {"content": "done"}])
    entered, release, parking = held_park(ledger)

    async def scenario() -> None:
        task = asyncio.create_task(runtime.run(trigger="webhook"))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 60)
        if told:
            runtime.cancelling(parking[0], by)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        runtime.close()
    return ledger.stream(parking[0])


def test_a_host_stopping_as_a_run_parks_leaves_it_parked(ledger: Ledger) -> None:
    events = cancel_while_parking(ledger, by=None, told=False)
    assert type(events[-1]) is ev.RunParked
    assert not any(isinstance(e, ev.RunEnded) for e in events)


def test_a_person_cancelling_a_run_as_it_parks_ends_it(ledger: Ledger) -> None:
    events = cancel_while_parking(ledger, by="alice")
    assert [type(e) for e in events[-2:]] == [ev.RunParked, ev.RunTerminated]
    assert events[-1].by == "alice"


def test_a_cancel_naming_nobody_as_a_run_parks_ends_it(ledger: Ledger) -> None:
    events = cancel_while_parking(ledger, by=None)
    assert [type(e) for e in events[-2:]] == [ev.RunParked, ev.RunTerminated]
    assert events[-1].reason == "cancelled" and events[-1].by is None
