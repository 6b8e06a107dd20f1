"""Sub-agents: real OwlClaw agents started by a parent's run (spawn_agent).

A child is registered with its parent, depth and withheld tools (AgentRegistered) and its run is
accepted through ``Agents`` like any other (placed like any agent, its own streams), keyed by
the spawning call's idempotency key, so a resumed parent never starts it twice. When a child's
run ends, its host reports to the parent's writer (SubAgentFinished on the parent's stream),
which resumes a parent run that waits for it; a parent activated later reconciles from the
ledger any report a dying host did not send.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

from events import Ledger
from events import catalog as ev
from owlclaw.agents import Agents
from owlclaw.messages import Activate, SubAgentFinished, Submit
from owlclaw.reports.listings import SpawnNode

log = logging.getLogger("owlclaw.subagents")
FOCUS_CHARS = 500
CONTEXT_KEY = "spawned_by"
"""Where a child's RunQueued context names its parent's spawn."""


def report_of(events: list[ev.LedgerEvent]) -> SubAgentFinished | None:
    """A child's ended run as the message to its parent (None: not a sub-agent's run, or
    not ended)."""
    start = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    end = next((e for e in events if isinstance(e, ev.RunEnded)), None)
    if start is None or end is None or CONTEXT_KEY not in start.context:
        return None
    spawned = dict(start.context[CONTEXT_KEY])
    status, told = ended_as(end)
    return SubAgentFinished(
        agent_id=spawned["parent_agent_id"],
        spawn_id=spawned["spawn_id"],
        run_id=UUID(spawned["run_id"]),
        call_id=spawned["call_id"],
        child_agent_id=start.agent_id,
        child_run_id=start.originator_id,
        wait=bool(spawned["wait"]),
        status=status,
        answer=told,
        tokens=end.tokens,
        cost_usd=end.cost_usd,
    )


def ended_as(end: ev.LedgerEvent) -> tuple[str, str]:
    """A run's end as another agent is told it: its status (``completed``, ``failed``, ...)
    and its answer, error or reason."""
    match end:
        case ev.RunCompleted(answer=answer):
            told = answer
        case ev.RunFailed(error=error):
            told = error
        case _:
            told = getattr(end, "reason", "")
    return type(end).__name__.removeprefix("Run").lower(), told


class SubAgents:
    """What spawn_agent needs of the world: registering a child and accepting its run."""

    def __init__(self, ledger: Ledger, agents: Agents):
        self.ledger = ledger
        self.agents = agents

    async def start(
        self,
        child_agent_id: str,
        app_dir: str,
        *,
        parent_agent_id: str,
        depth: int,
        withheld_tools: list[str],
        task: str,
        spawned_by: dict[str, Any],
        key: str,
    ) -> UUID:
        """Register the child (idempotent) and have it accept its run; the run's id."""
        await asyncio.to_thread(
            self.ledger.register_agent,
            child_agent_id,
            app_dir,
            parent_agent_id=parent_agent_id,
            depth=depth,
            withheld_tools=withheld_tools,
        )
        run_id = await self.agents.ask(
            Submit(
                agent_id=child_agent_id,
                trigger="spawn",
                focus=task[:FOCUS_CHARS],
                payload={"task": task} if len(task) > FOCUS_CHARS else None,
                context={CONTEXT_KEY: spawned_by},
                idempotency_key=key,
            )
        )
        return UUID(run_id)

    async def ended(self, child_run_id: UUID) -> SubAgentFinished | None:
        """The child run's report once it has ended."""
        return report_of(await asyncio.to_thread(self.ledger.stream, child_run_id))


def spawn_tree(ledger: Ledger, agent_id: str, max_depth: int = 6) -> list[SpawnNode]:
    """The sub-agent runs ``agent_id`` spawned, and theirs, from the agents' streams."""
    if max_depth == 0:
        return []
    agent = ledger.load_agent(agent_id)
    nodes = []
    for e in ledger.stream(agent.id):
        if isinstance(e, ev.SubAgentSpawned):
            spawn = agent.state.spawns.get(e.spawn_id)
            nodes.append(
                SpawnNode(
                    agent_id=e.child_agent_id,
                    run_id=str(e.child_run_id),
                    task=e.task,
                    status=spawn.status if spawn is not None else "finished",
                    children=spawn_tree(ledger, e.child_agent_id, max_depth - 1),
                )
            )
    return nodes


async def watch_subagents(ledger: Ledger, agents: Agents, agent_ids: list[str]) -> int:
    """One pass over the sub-agent runs of ``agent_ids`` (and of their sub-agents) that their
    parent still waits for: an ended one whose report never arrived is reported again; any
    other is activated, which resumes it if its host died (Ray restarts an actor, but only
    a message brings its agents back). How many are still running."""
    running = 0
    parents = list(agent_ids)
    while parents:
        parent = parents.pop()
        state = (await asyncio.to_thread(ledger.load_agent, parent)).state
        for spawn in [s for s in state.spawns.values() if not s.finished]:
            report = report_of(await asyncio.to_thread(ledger.stream, spawn.child_run_id))
            try:
                if report is not None:
                    await agents.ask(report)
                    continue
                running += 1
                await agents.ask(Activate(agent_id=spawn.child_agent_id))
            except Exception:  # a host restarting: the next pass tries again
                log.warning("sub-agent %s of %s not reached", spawn.child_agent_id, parent)
                continue
            parents.append(spawn.child_agent_id)
    return running
