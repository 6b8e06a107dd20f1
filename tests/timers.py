"""Timers fired to agents hosted in the test's process, and schedules a scripted run requests:
the timer tests drive the timer service with these, whatever its backend."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from actors.host import AgentHost
from events import Ledger
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Fire, FireOutcome, Result
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.timers.worker import Deliver

T = TypeVar("T")


def host(ledger: Ledger, script: str) -> AgentHost:
    return AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{script}",))))


def delivering(ledger: Ledger, work: Callable[[Deliver], Awaitable[T]], script: str = "act") -> T:
    """Run ``work`` with fires delivered to agents hosted here (playing ``scripted/<script>``);
    returns once the runs those fires started have ended."""

    async def main() -> T:
        agents = host(ledger, script)
        started: list[tuple[str, str]] = []

        async def deliver(fire: Fire) -> FireOutcome:
            outcome = await agents.ask(fire)
            if outcome.run_id is not None:
                started.append((fire.agent_id, outcome.run_id))
            return outcome

        try:
            result = await work(deliver)
            for agent_id, run_id in started:
                await agents.ask(Result(agent_id=agent_id, run_id=run_id))
            return result
        finally:
            await agents.close()

    return asyncio.run(main())


def schedule(ledger: Ledger, agent_id: str, tool: str, **arguments: Any) -> str:
    register_script("plan", [{"tool_calls": [{"name": tool, "arguments": arguments}]}])
    register_script("act", [{"content": "checked"}])
    runtime = AgentRuntime(ledger, agent_id, models=["scripted/plan"])
    result = asyncio.run(runtime.run("webhook"))
    runtime.close()
    return result.run_id
