"""Finding an agent's actor from any driver: named, detached actors in an OwlClaw namespace.

Placement decides which actor hosts an agent: ``dedicated`` (one actor per agent, the default:
isolation) or ``shared`` (agents hashed onto a pool of host actors: a Ray actor is a ~110 MB
process, so one per agent holds ~150 agents per node). The client API is the same for both.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
import ray

from actors.ray_host import AgentHostActor
from events import Ledger, UnknownAgent
from events import catalog as ev
from owlclaw.config import OwlClawConfig
from owlclaw.timers.fires import TimerFire
from projections.feed import afollow_run

Placement = Literal["dedicated", "shared"]
NAMESPACE = "owlclaw"


class AgentDirectory:
    def __init__(
        self,
        ledger: Ledger,
        config: OwlClawConfig,
        *,
        placement: Placement = "dedicated",
        pool_size: int = 4,
        idle_s: float | None = 300.0,
        actor_options: dict[str, Any] | None = None,
    ):
        self.ledger = ledger
        self.config = config
        self.placement = placement
        self.pool_size = pool_size
        self.idle_s = idle_s
        self.actor_options = actor_options or {}
        """Extra Ray actor options, e.g. ``{"scheduling_strategy": "SPREAD"}`` or resources."""
        self._handles: dict[str, Any] = {}

    def actor_name(self, agent_id: str) -> str:
        if self.placement == "dedicated":
            return f"agent:{agent_id}"
        return f"host:{zlib.crc32(agent_id.encode()) % self.pool_size}"

    def handle(self, agent_id: str) -> Any:
        """The agent's actor, created on first use (get_if_exists: any driver finds the same)."""
        name = self.actor_name(agent_id)
        if name not in self._handles:
            self._handles[name] = AgentHostActor.options(  # type: ignore[attr-defined]
                name=name,
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                **self.actor_options,
            ).remote(msgspec.to_builtins(self.config), self.idle_s)
        return self._handles[name]

    def register(self, agent_id: str, app_dir: str = "") -> None:
        self.ledger.register_agent(agent_id, app_dir)

    async def submit(self, agent_id: str, trigger: str, **kwargs: Any) -> str:
        """Accept a run of a registered agent; returns its run id (UnknownAgent otherwise)."""
        self.ledger.load_agent(agent_id)
        run_id: str = await self.handle(agent_id).submit.remote(agent_id, trigger, **kwargs)
        return run_id

    async def result(self, agent_id: str, run_id: str, *, attempts: int = 30) -> dict[str, Any]:
        """Wait for a run to end. If its actor dies meanwhile, Ray restarts it and the wait goes
        on there: the restarted actor resumes the interrupted run from the ledger."""
        for attempt in range(attempts):
            try:
                result: dict[str, Any] = await self.handle(agent_id).result.remote(agent_id, run_id)
                return result
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def run(self, agent_id: str, trigger: str, **kwargs: Any) -> dict[str, Any]:
        """Accept a run and wait for it in one call to the actor (if the actor dies meanwhile,
        ``submit`` + ``result`` is the way to follow the run through the restart)."""
        self.ledger.load_agent(agent_id)
        result: dict[str, Any] = await self.handle(agent_id).run.remote(agent_id, trigger, **kwargs)
        return result

    def events(
        self, run_id: str, *, poll_s: float = 0.05, timeout_s: float = 600.0
    ) -> AsyncIterator[ev.LedgerEvent]:
        """The run's events as they are committed, until its end event (from any driver: they
        are read from the ledger, which outlives the actor)."""
        return afollow_run(self.ledger, run_id, poll_s=poll_s, timeout_s=timeout_s)

    async def activate(self, agent_id: str) -> float:
        """Make the agent's actor ready (started, agent rebuilt); milliseconds the actor took."""
        taken: float = await self.handle(agent_id).activate.remote(agent_id)
        return taken

    async def fire(self, fire: TimerFire) -> dict[str, Any]:
        outcome: dict[str, Any] = await self.handle(fire.agent_id).fire.remote(
            msgspec.to_builtins(fire)
        )
        return outcome

    def status(self, agent_id: str) -> dict[str, Any]:
        status: dict[str, Any] = ray.get(self.handle(agent_id).status.remote(agent_id))
        return status

    def cancel(self, agent_id: str, run_id: str) -> bool:
        cancelled: bool = ray.get(self.handle(agent_id).cancel.remote(agent_id, run_id))
        return cancelled

    def shutdown(self) -> None:
        """Kill the actors this directory used (they are detached: they outlive drivers)."""
        for handle in self._handles.values():
            ray.kill(handle)
        self._handles.clear()


__all__ = ["AgentDirectory", "Placement", "UnknownAgent"]
