"""Finding an agent's actor from any driver: named, detached actors in an OwlClaw namespace.

Placement decides which actor hosts an agent: ``dedicated`` (one actor per agent, the default:
isolation) or ``shared`` (agents hashed onto a pool of host actors). A dedicated actor is a
~115 MB process (Ray ~55 MB, OwlClaw ~25 MB; litellm and the embedding model are the node's,
shared: ``actors.llm``, ``actors.embedding``); a shared host carries litellm itself (~315 MB)
for all its agents. The client API is the same for both.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
import ray

from actors import NAMESPACE
from actors.ray_host import AgentHostActor
from events import Ledger, UnknownAgent
from events import catalog as ev
from owlclaw.agents import HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.runtime.approvals import ApprovalAnswer, Decision
from owlclaw.runtime.loop import RunResult
from owlclaw.timers.fires import FireOutcome, TimerFire
from owlclaw.tools.subagents import SubAgentReport
from owlclaw.tools.switches import ToolsChange
from projections.feed import afollow_run

Placement = Literal["dedicated", "shared"]


class AgentDirectory:
    """The Ray implementation of ``owlclaw.agents.Agents``.

    ``owner``: this directory started the actors and ``close`` kills them (``owlclaw run``);
    a client of actors someone else serves (the Hatchet worker, a CLI) leaves them running.
    """

    def __init__(
        self,
        ledger: Ledger,
        config: OwlClawConfig,
        *,
        placement: Placement = "dedicated",
        pool_size: int | None = None,
        idle_s: float | None = 300.0,
        actor_options: dict[str, Any] | None = None,
        owner: bool = True,
        node_llm: bool | None = None,
    ):
        self.ledger = ledger
        self.config = config
        self.placement = placement
        self.pool_size = config.runtime.hosts if pool_size is None else pool_size
        self.idle_s = idle_s
        self.actor_options = actor_options or {}
        """Extra Ray actor options, e.g. ``{"scheduling_strategy": "SPREAD"}``, resources, or
        another ``namespace`` (isolated sets of agents on one cluster)."""
        self.owner = owner
        self.node_llm = placement == "dedicated" if node_llm is None else node_llm
        """The actors ask their models through the node's one litellm (``actors.llm``), not
        their own: by default for ``dedicated`` placement, where each actor would carry
        litellm's ~210 MB for one agent; a shared host carries it for many and saves the hop."""
        self._handles: dict[str, Any] = {}

    def settings(self) -> dict[str, Any]:
        """What another directory needs to find the same actors (an actor's own, for the
        sub-agents its agents spawn)."""
        return {
            "placement": self.placement,
            "pool_size": self.pool_size,
            "idle_s": self.idle_s,
            "actor_options": self.actor_options,
            "node_llm": self.node_llm,
        }

    def actor_name(self, agent_id: str) -> str:
        if self.placement == "dedicated":
            return f"agent:{agent_id}"
        return f"host:{zlib.crc32(agent_id.encode()) % self.pool_size}"

    def handle(self, agent_id: str) -> Any:
        """The agent's actor, created on first use (get_if_exists: any driver finds the same)."""
        return self._actor(self.actor_name(agent_id))

    async def start_hosts(self) -> int:
        """Start every host actor of ``shared`` placement and wait until each is ready, so that
        no message waits for a host's start (seconds: a process, the ledger, the embedder);
        ``dedicated`` placement starts an agent's actor on its first message. How many."""
        if self.placement != "shared":
            return 0
        hosts = [self._actor(f"host:{i}") for i in range(self.pool_size)]
        await asyncio.gather(*(host.pid.remote() for host in hosts))
        return len(hosts)

    def _actor(self, name: str) -> Any:
        if name not in self._handles:
            options = {
                "name": name,
                "namespace": NAMESPACE,
                "lifetime": "detached",
                "get_if_exists": True,
                **self.actor_options,
            }
            self._handles[name] = AgentHostActor.options(**options).remote(  # type: ignore[attr-defined]
                msgspec.to_builtins(self.config), self.idle_s, self.settings()
            )
        return self._handles[name]

    async def _ask(self, agent_id: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` of the agent's actor. An error the host raised (UnknownAgent,
        ApprovalClosed, ...) is raised here as itself: Ray wraps it with the actor's traceback,
        which the CLI, the webhook and the console would otherwise show whole."""
        try:
            return await getattr(self.handle(agent_id), method).remote(*args, **kwargs)
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, Exception) and not isinstance(e.cause, ray.exceptions.RayError):
                raise e.cause from None
            raise

    async def submit(
        self,
        agent_id: str,
        trigger: str,
        *,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Accept a run of a registered agent; returns its run id (UnknownAgent otherwise)."""
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        run_id: str = await self._ask(
            agent_id, "submit", agent_id, trigger, focus, payload, context, idempotency_key
        )
        return run_id

    async def result(self, agent_id: str, run_id: str, *, attempts: int = 30) -> RunResult:
        """Wait for a run to end. If its actor dies meanwhile, Ray restarts it and the wait goes
        on there: the restarted actor resumes the interrupted run from the ledger."""
        for attempt in range(attempts):
            try:
                result: RunResult = await self._ask(agent_id, "result", agent_id, run_id)
                return result
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def run(self, agent_id: str, trigger: str, **kwargs: Any) -> RunResult:
        """Accept a run and wait for it in one call to the actor (if the actor dies meanwhile,
        ``submit`` + ``result`` is the way to follow the run through the restart)."""
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        result: RunResult = await self._ask(agent_id, "run", agent_id, trigger, **kwargs)
        return result

    def events(self, run_id: str, *, timeout_s: float = 600.0) -> AsyncIterator[ev.LedgerEvent]:
        """The run's events as they are committed, until its end event (from any driver: they
        are read from the ledger, which outlives the actor)."""
        return afollow_run(self.ledger, run_id, timeout_s=timeout_s)

    async def activate(self, agent_id: str) -> float:
        """Make the agent's actor ready (started, agent rebuilt); milliseconds the actor took."""
        taken: float = await self._ask(agent_id, "activate", agent_id)
        return taken

    async def fire(self, fire: TimerFire) -> FireOutcome:
        outcome: FireOutcome = await self._ask(fire.agent_id, "fire", fire)
        return outcome

    async def receive(self, agent_id: str, source: str, payload: dict[str, Any]) -> int:
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        position: int = await self._ask(agent_id, "receive", agent_id, source, payload)
        return position

    async def change_tools(
        self, agent_id: str, enable: list[str], disable: list[str]
    ) -> ToolsChange:
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        change: ToolsChange = await self._ask(agent_id, "change_tools", agent_id, enable, disable)
        return change

    async def cancel_schedule(
        self, agent_id: str, schedule_id: str, by: str, reason: str = ""
    ) -> int:
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        position: int = await self._ask(
            agent_id, "cancel_schedule", agent_id, schedule_id, by, reason
        )
        return position

    async def answer_approval(self, agent_id: str, decision: Decision) -> ApprovalAnswer:
        await asyncio.to_thread(self.ledger.require_agent, agent_id)
        answer: ApprovalAnswer = await self._ask(agent_id, "answer_approval", agent_id, decision)
        return answer

    async def subagent_finished(self, agent_id: str, report: SubAgentReport) -> None:
        await self._ask(agent_id, "subagent_finished", agent_id, report)

    async def expire_approvals(self, agent_id: str) -> int:
        expired: int = await self._ask(agent_id, "expire_approvals", agent_id)
        return expired

    async def status(self, agent_id: str | None = None) -> HostStatus:
        """One agent's host, or (None) every host this directory has used, merged."""
        handles = [self.handle(agent_id)] if agent_id else list(self._handles.values())
        statuses: list[HostStatus] = await asyncio.gather(
            *(h.status.remote(agent_id) for h in handles)
        )
        return HostStatus(
            agents={a: s for status in statuses for a, s in status.agents.items()},
            activations=sum(s.activations for s in statuses),
            passivations=sum(s.passivations for s in statuses),
        )

    async def cancel(self, agent_id: str, run_id: str) -> bool:
        cancelled: bool = await self._ask(agent_id, "cancel", agent_id, run_id)
        return cancelled

    async def close(self) -> None:
        """Kill the actors this directory started (they are detached: they outlive drivers)."""
        if self.owner:
            for handle in self._handles.values():
                ray.kill(handle)
        self._handles.clear()


__all__ = ["NAMESPACE", "AgentDirectory", "Placement", "UnknownAgent"]
