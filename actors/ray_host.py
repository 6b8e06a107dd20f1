"""The agent host as a Ray actor: async, restartable, control calls in their own group.

Run messages go through the host's per-agent mailboxes (Ray alone does not order the calls of
an async actor). ``status`` runs in the ``control`` concurrency group, so it answers even while
the host's loop is busy; ``cancel`` runs on that loop, which handlers never block.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import ray

from actors.embedding import NodeEmbedder
from actors.host import AgentHost
from actors.llm import NodeLLM
from events import Ledger
from owlclaw.agents import HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.database import open_database
from owlclaw.runtime.approvals import ApprovalAnswer, Decision
from owlclaw.runtime.loop import RunResult
from owlclaw.timers.fires import FireOutcome, TimerFire
from owlclaw.tools.subagents import SubAgentReport
from owlclaw.tools.switches import ToolsChange
from owlclaw.wiring import open_memory


@ray.remote(concurrency_groups={"control": 4}, max_restarts=-1)  # type: ignore[call-overload]
class AgentHostActor:
    def __init__(
        self, config: dict[str, Any], idle_s: float | None, directory: dict[str, Any] | None = None
    ):
        """``directory``: the settings of the directory that created this actor, so that the
        sub-agents its agents spawn are placed (and report back) through the same actors."""
        from actors.directory import AgentDirectory  # the directory creates these actors

        self.config = msgspec.convert(config, OwlClawConfig)
        database = open_database(self.config)
        self.ledger = Ledger(database.url, snapshot_interval=self.config.ledger.snapshot_interval)
        settings = self.config.memory
        memory = open_memory(
            self.ledger,
            self.config,
            NodeEmbedder(settings.embedding_model, settings.embedding_dimensions),
        )
        agents = (
            AgentDirectory(self.ledger, self.config, owner=False, **directory)
            if directory is not None
            else None
        )
        llm = NodeLLM() if directory is not None and directory["node_llm"] else None
        self.host = AgentHost(
            self.ledger, self.config, idle_s=idle_s, memory=memory, agents=agents, llm=llm
        )

    async def submit(
        self,
        agent_id: str,
        trigger: str,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        return await self.host.submit(
            agent_id,
            trigger,
            focus=focus,
            payload=payload,
            context=context,
            idempotency_key=idempotency_key,
        )

    async def result(self, agent_id: str, run_id: str) -> RunResult:
        return await self.host.result(agent_id, run_id)

    async def run(
        self,
        agent_id: str,
        trigger: str,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> RunResult:
        """Accept and await a run in one round trip."""
        run_id = await self.host.submit(
            agent_id, trigger, focus=focus, payload=payload, context=context
        )
        return await self.host.result(agent_id, run_id)

    async def activate(self, agent_id: str) -> float:
        return await self.host.activate(agent_id)

    async def fire(self, fire: TimerFire) -> FireOutcome:
        return await self.host.fire(fire)

    async def receive(self, agent_id: str, source: str, payload: dict[str, Any]) -> int:
        return await self.host.receive(agent_id, source, payload)

    async def change_tools(
        self, agent_id: str, enable: list[str], disable: list[str]
    ) -> ToolsChange:
        return await self.host.change_tools(agent_id, enable, disable)

    async def cancel_schedule(
        self, agent_id: str, schedule_id: str, by: str, reason: str = ""
    ) -> int:
        return await self.host.cancel_schedule(agent_id, schedule_id, by, reason)

    async def answer_approval(self, agent_id: str, decision: Decision) -> ApprovalAnswer:
        return await self.host.answer_approval(agent_id, decision)

    async def expire_approvals(self, agent_id: str) -> int:
        return await self.host.expire_approvals(agent_id)

    async def subagent_finished(self, agent_id: str, report: SubAgentReport) -> None:
        await self.host.subagent_finished(agent_id, report)

    @ray.method(concurrency_group="control")
    def status(self, agent_id: str | None = None) -> HostStatus:
        return self.host.status_now(agent_id)

    async def cancel(self, agent_id: str, run_id: str) -> bool:
        """On the host's loop (a parked run ends through the agent's writer, children are
        cancelled too); handlers never block that loop, so it answers while a run is in flight."""
        return await self.host.cancel(agent_id, run_id)

    @ray.method(concurrency_group="control")
    def pid(self) -> int:
        import os

        return os.getpid()

    @ray.method(concurrency_group="control")
    def rss_bytes(self) -> int:
        """Resident memory of this actor's process (Linux)."""
        status = Path("/proc/self/status").read_text().splitlines()
        kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        return kb * 1024

    @ray.method(concurrency_group="control")
    def imported(self, modules: list[str]) -> list[str]:
        """Which of ``modules`` this actor's process has imported (what its memory holds)."""
        return [m for m in modules if m in sys.modules]

    @ray.method(concurrency_group="control")
    def node(self) -> str:
        node_id: str = ray.get_runtime_context().get_node_id()
        return node_id
