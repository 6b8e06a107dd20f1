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
from typing import Any, Literal, TypeVar

import msgspec
import ray

from actors import NAMESPACE
from actors.ray_host import AgentHostActor
from events import Ledger, UnknownAgent
from events import catalog as ev
from owlclaw.agents import HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.messages import (
    AnswerApproval,
    CancelSchedule,
    ChangeTools,
    Message,
    Receive,
    Result,
    Submit,
    SubmitAndWait,
)
from projections.feed import afollow_run

R = TypeVar("R")
Placement = Literal["dedicated", "shared"]
REGISTERED_FIRST = (Submit, SubmitAndWait, Receive, ChangeTools, CancelSchedule, AnswerApproval)
"""Messages from outside (a client, an operator) that must name a registered agent: checked
before any actor is asked, so that a wrong name starts none."""
RESULT_ATTEMPTS = 30
"""How often a ``Result`` is asked again while its actor restarts (every 0.5 s)."""


class Placed(msgspec.Struct, frozen=True):
    """How a directory places agents: what another directory needs to find the same actors (an
    actor's own, for the sub-agents its agents spawn; ``actors.ray_host.Placed``)."""

    placement: Placement
    pool_size: int
    idle_s: float | None
    actor_options: dict[str, Any]
    node_llm: bool

    def open(self, ledger: Ledger, config: OwlClawConfig) -> AgentDirectory:
        return AgentDirectory(ledger, config, owner=False, **msgspec.structs.asdict(self))


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

    def placed(self) -> Placed:
        return Placed(
            self.placement, self.pool_size, self.idle_s, self.actor_options, self.node_llm
        )

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
                msgspec.to_builtins(self.config), self.idle_s, self.placed()
            )
        return self._handles[name]

    async def ask(self, message: Message[R]) -> R:
        """Forward the message to its agent's actor (one round trip). A ``Result`` outlasts the
        actor's death: Ray restarts it and the wait goes on there (the restarted actor resumes
        the interrupted run from the ledger)."""
        if isinstance(message, REGISTERED_FIRST):
            await asyncio.to_thread(self.ledger.require_agent, message.agent_id)
        retries = RESULT_ATTEMPTS - 1 if isinstance(message, Result) else 0
        for _ in range(retries):
            try:
                return await self._forward(message)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                await asyncio.sleep(0.5)
        return await self._forward(message)

    async def _forward(self, message: Message[R]) -> R:
        """An error the host raised (UnknownAgent, ApprovalClosed, ...) is raised here as itself:
        Ray wraps it with the actor's traceback, which the CLI, the webhook and the console
        would otherwise show whole."""
        try:
            reply: R = await self.handle(message.agent_id).ask.remote(message)
            return reply
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, Exception) and not isinstance(e.cause, ray.exceptions.RayError):
                raise e.cause from None
            raise

    def events(self, run_id: str, *, timeout_s: float = 600.0) -> AsyncIterator[ev.LedgerEvent]:
        """The run's events as they are committed, until its end event (from any driver: they
        are read from the ledger, which outlives the actor)."""
        return afollow_run(self.ledger, run_id, timeout_s=timeout_s)

    async def status(self, agent_id: str | None = None) -> HostStatus:
        """One agent's host, or (None) every host this directory has used, merged."""
        handles = [self.handle(agent_id)] if agent_id else list(self._handles.values())
        statuses: list[HostStatus] = await asyncio.gather(
            *(h.status.remote(agent_id) for h in handles)
        )
        return HostStatus.merged(statuses)

    async def close(self) -> None:
        """Kill the actors this directory started (they are detached: they outlive drivers)."""
        if self.owner:
            for handle in self._handles.values():
                ray.kill(handle)
        self._handles.clear()


__all__ = ["NAMESPACE", "AgentDirectory", "Placement", "UnknownAgent"]
