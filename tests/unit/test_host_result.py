"""Asking for a run's result at the edges of its acceptance: while the accepting call has
committed RunQueued but not yet queued the run, and after an acceptance committed whose
caller never heard back (in-process host, in-memory ledger)."""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from typing import Any

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Activate, Cancel, Result, RunResult, Submit, SubmitAndWait
from owlclaw.runtime.inbox import Inbox
from tests.scripted import call


def hosting(ledger: Ledger) -> AgentHost:
    register_script("answers", [{"content": "done"}])
    return AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("scripted/answers",))))


def test_a_result_asked_once_run_queued_is_visible_waits_for_the_run_to_be_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A timer test polled the ledger, saw the fire's RunQueued and asked for its result before
    the accepting call had queued the run: the host answered UnknownRun."""
    ledger = Ledger.in_memory()
    ledger.register_agent("eager")
    submit = Inbox.submit
    committed, release = asyncio.Event(), asyncio.Event()

    async def held_after_commit(inbox: Inbox, message: Submit) -> Any:
        accepted = await submit(inbox, message)
        committed.set()
        await release.wait()
        return accepted

    monkeypatch.setattr(Inbox, "submit", held_after_commit)

    async def scenario() -> tuple[str, str]:
        host = hosting(ledger)
        accepting = asyncio.create_task(host.ask(Submit(agent_id="eager", trigger="webhook")))
        await committed.wait()
        [queued] = [
            e for e in ledger.stream(ledger.load_agent("eager").id) if isinstance(e, ev.RunQueued)
        ]
        asking = asyncio.create_task(host.ask(Result(agent_id="eager", run_id=str(queued.run_id))))
        await asyncio.sleep(0)  # the result is asked while the run is not queued yet
        release.set()
        run_id, result = await accepting, await asking
        await host.close()
        return run_id, result.status

    run_id, status = asyncio.run(scenario())
    assert status == "completed"
    started = [e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.RunStarted)]
    assert len(started) == 1  # queued once: by the accepting call, not again by the result


def test_a_run_accepted_in_the_ledger_but_never_queued_here_runs_when_its_result_is_asked() -> None:
    """The acceptance committed, but the database went away before its caller heard back: the
    call failed and queued nothing (and a retried timer delivery is then a duplicate)."""
    ledger = Ledger.in_memory()
    ledger.register_agent("unheard")

    async def scenario() -> tuple[str, str]:
        host = hosting(ledger)
        await host.ask(Activate(agent_id="unheard"))
        agent = ledger.load_agent("unheard")
        queued = agent.queue_run("schedule_once", "wake up")
        ledger.append(agent)  # committed behind the hosted copy's back
        result = await host.ask(Result(agent_id="unheard", run_id=str(queued.run_id)))
        await host.close()
        return str(queued.run_id), result.status

    run_id, status = asyncio.run(scenario())
    assert status == "completed"
    assert isinstance(ledger.stream(uuid.UUID(run_id))[-1], ev.RunCompleted)


def test_a_result_for_a_run_the_agent_never_accepted_is_refused() -> None:
    ledger = Ledger.in_memory()
    ledger.register_agent("plain")

    async def scenario() -> None:
        host = hosting(ledger)
        try:
            await host.ask(Result(agent_id="plain", run_id=str(uuid.uuid4())))
        finally:
            await host.close()

    with pytest.raises(KeyError, match="unknown run"):
        asyncio.run(scenario())


def test_ended_runs_leave_no_future_behind_and_their_results_are_read_back_the_same() -> None:
    """A busy agent stays active: each run's future was kept, one more per run, until it went
    idle. An ended run's result is answered from the ledger instead; a parked run's stays."""
    ledger = Ledger.in_memory()
    ledger.register_agent("busy")
    ask = [{"tool_calls": [call("ask_human", question="Go on?", options=["yes", "no"])]}]
    cases = {"xparkme": ask, "xbravo": [{"content": "b"}], "xalpha": [{"content": "a"}]}
    register_script("busy", {"cases": [{"when": w, "steps": steps} for w, steps in cases.items()]})
    config = OwlClawConfig(runtime=RuntimeConfig(models=("scripted/busy",)))

    async def scenario() -> tuple[list[RunResult], list[RunResult], list[str]]:
        host = AgentHost(ledger, config)
        try:
            waited = [
                await host.ask(SubmitAndWait(agent_id="busy", trigger="webhook", focus=focus))
                for focus in ("xalpha", "xbravo", "xparkme")
            ]
            hosted = host.hosted.get("busy")
            assert hosted is not None
            kept = list(hosted.results)
            asked = [await host.ask(Result(agent_id="busy", run_id=r.run_id)) for r in waited]
            return waited, asked, kept
        finally:
            await host.close()

    waited, asked, kept = asyncio.run(scenario())
    assert [r.status for r in waited] == ["completed", "completed", "parked"]
    assert kept == [waited[2].run_id]  # the parked run's, which the ledger does not answer
    assert asked == waited


def test_a_cancelled_run_nobody_waits_for_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    """Each cancelled run's future held a RunCancelled nobody retrieved: asyncio logged it as
    an error with its traceback when the future was collected."""
    ledger = Ledger.in_memory()
    ledger.register_agent("dropped")
    register_script("dropped", {"steps": [{"content": "late"}], "latency_s": 60})
    config = OwlClawConfig(runtime=RuntimeConfig(models=("scripted/dropped",)))

    async def scenario() -> str:
        host = AgentHost(ledger, config)
        try:
            run_id = await host.ask(Submit(agent_id="dropped", trigger="webhook"))
            async with asyncio.timeout(60):  # the run is inside its (slow) model call
                while host.status_now("dropped").agents["dropped"].running != run_id:
                    await asyncio.sleep(0.01)
            assert await host.ask(Cancel(agent_id="dropped", run_id=run_id))
            return run_id
        finally:
            await host.close()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run_id = asyncio.run(scenario())
        gc.collect()
    assert isinstance(ledger.stream(uuid.UUID(run_id))[-1], ev.RunTerminated)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
