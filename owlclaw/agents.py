"""Agents in this process: one runtime per agent, its runs and timer fires strictly in order.

The actors of ``actors/`` give the same guarantee across a Ray cluster; this is the embedded,
single-process placement used by the timer service, the demo and the tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from events import Ledger, UnknownAgent
from owlclaw.config import OwlClawConfig
from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.llm.scripted import load_script_dir
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.loop import AgentRuntime, FireOutcome, RunResult
from owlclaw.timers.fires import TimerFire
from projections.memory import MemoryStore


class LocalAgents:
    def __init__(
        self,
        ledger: Ledger,
        config: OwlClawConfig | None = None,
        *,
        memory: MemoryStore | None = None,
        registry: Registry | None = None,
    ):
        self.ledger = ledger
        self.config = config or OwlClawConfig()
        self.memory = memory
        self.registry = registry
        if self.config.runtime.scripts_dir:
            load_script_dir(Path(self.config.runtime.scripts_dir))
        litellm_with_offline_providers()  # seconds to import: at start-up, not in the first run
        self._runtimes: dict[str, AgentRuntime] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def runtime(self, agent_id: str) -> AgentRuntime:
        """The agent's runtime, with the app directory it was registered with (if any)."""
        if agent_id not in self._runtimes:
            self._runtimes[agent_id] = AgentRuntime(
                self.ledger,
                agent_id,
                models=list(self.config.runtime.models),
                app_dir=self._app_dir(agent_id),
                registry=self.registry,
                memory=self.memory,
                limits=self.config.runtime,
            )
        return self._runtimes[agent_id]

    def _app_dir(self, agent_id: str) -> Path | None:
        try:
            app_dir = self.ledger.load_agent(agent_id).state.app_dir
        except UnknownAgent:
            return None
        return Path(app_dir) if app_dir else None

    def _lock(self, agent_id: str) -> asyncio.Lock:
        return self._locks.setdefault(agent_id, asyncio.Lock())

    async def run(self, agent_id: str, trigger: str, **kwargs: Any) -> RunResult:
        async with self._lock(agent_id):
            return await self.runtime(agent_id).run(trigger, **kwargs)

    async def fire(self, fire: TimerFire) -> FireOutcome:
        async with self._lock(fire.agent_id):
            return await self.runtime(fire.agent_id).fire(fire)

    def close(self) -> None:
        for runtime in self._runtimes.values():
            runtime.close()
        self._runtimes.clear()
