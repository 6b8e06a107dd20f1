"""The agent host without Ray: passivation and re-activation, queued runs surviving their host."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.loop import AgentRuntime

pytestmark = pytest.mark.integration


def config() -> OwlClawConfig:
    register_script("host-answer", [{"content": "done"}])
    return OwlClawConfig(runtime=RuntimeConfig(models=("scripted/host-answer",)))


def test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger(ledger: Ledger) -> None:
    ledger.register_agent("sleepy")

    async def scenario() -> tuple[dict[str, object], dict[str, object], str]:
        host = AgentHost(ledger, config(), idle_s=0.2)
        first = await host.submit("sleepy", "webhook")
        await host.result("sleepy", first)
        await asyncio.sleep(0.6)
        passivated = host.status()
        second = await host.submit("sleepy", "webhook")
        result = await host.result("sleepy", second)
        status = host.status()
        await host.close()
        return passivated, status, str(result["status"])

    passivated, status, second_status = asyncio.run(scenario())
    assert passivated["agents"] == {} and passivated["passivations"] == 1
    assert status["activations"] == 2 and second_status == "completed"
    assert [ledger.stream(r)[0].run_no for r in ledger.list_runs("sleepy")] == [1, 2]  # type: ignore[attr-defined]


def test_runs_accepted_by_a_host_that_died_run_when_the_agent_is_next_activated(
    ledger: Ledger,
) -> None:
    ledger.register_agent("orphaned")
    accepted = AgentRuntime(ledger, "orphaned", models=["scripted/host-answer"])
    register_script("host-answer", [{"content": "done"}])
    queued = [asyncio.run(accepted.submit("webhook", focus=f"q{i}")) for i in range(3)]
    accepted.close()  # the host dies here: RunQueued committed, nothing started

    async def next_host() -> list[dict[str, object]]:
        host = AgentHost(ledger, config())
        fourth = await host.submit("orphaned", "webhook", focus="q3")
        results = [await host.result("orphaned", str(q.run_id)) for q in queued]
        results.append(await host.result("orphaned", fourth))
        await host.close()
        return results

    results = asyncio.run(next_host())
    assert [r["status"] for r in results] == ["completed"] * 4
    starts = [ledger.stream(r)[0] for r in ledger.list_runs("orphaned")]
    assert [(s.run_no, s.focus) for s in starts if isinstance(s, ev.RunStarted)] == [
        (1, "q0"),
        (2, "q1"),
        (3, "q2"),
        (4, "q3"),
    ]
    assert uuid.UUID(str(results[0]["run_id"])) == queued[0].run_id
