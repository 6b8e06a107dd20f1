"""Fencing: one writer per agent stream. A runtime commits as the agent's writer, rebasing
over the facts other writers may append and over its own earlier commits; when another host
took the agent over, the run stands down at its last commit."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from uuid import UUID

import msgspec

from events import Ledger, StreamConflict
from events import catalog as ev
from events.agent import Agent
from events.agent_state import AgentState
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.runtime.progress import RunProgress

FOREIGN_FACTS: tuple[type[ev.LedgerEvent], ...] = (
    ev.ScheduleRegistered,
    ev.InboundReceived,
    ev.AppAttached,
    ev.ToolsChanged,
    ev.ApprovalGranted,
    ev.ApprovalDenied,
    ev.ApprovalExpired,
    ev.ArchiveSealed,
    ev.MemoryArchived,
    ev.MemoryExpired,
)
"""Agent-stream events other writers append that the runtime's own facts commute with (the
memory age policy archives and deletes memories beside the agent's runs)."""
OWN_COMMITS_KEPT = 1000
"""How many of its own agent-stream versions a runtime remembers: far more than one run spans."""


class AgentWriter:
    """Commits as one agent's writer, remembering the agent-stream versions it committed: a
    trigger accepted while the agent's run is between steps is queued behind that run, not
    taken for a second host. Calls must be serialized (the runtime's ledger thread does)."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self._ours: set[int] = set()
        self._seen: tuple[int, bytes] | None = None
        """(version, state) of the agent as this writer last saw it stored."""

    def seen(self, agent: Agent) -> None:
        """Remember ``agent`` as stored now (just loaded, or just committed by this writer)."""
        if not agent.pending_events:
            self._seen = (agent.version, msgspec.msgpack.encode(agent.state))

    def current(self, agent_id: str) -> Agent | None:
        """The agent as this writer last saw it, if its stream has not moved since (a head
        lookup instead of loading snapshot and tail, twice a run); None if it has, or no
        agent was seen yet."""
        if self._seen is None:
            return None
        version, state = self._seen
        stream = agent_stream_id(agent_id)
        head = self.ledger.chains.stream_head(stream)
        if head is None or head[0] != version:
            return None
        return Agent(stream, msgspec.msgpack.decode(state, type=AgentState), version)

    def append(
        self,
        agent: Agent,
        *runs: Run,
        over: tuple[type[ev.LedgerEvent], ...] | None = FOREIGN_FACTS,
    ) -> tuple[Agent, list[int]]:
        """Commit ``agent`` and ``runs``, rebasing over ``over`` (None: any fact) and over this
        writer's own commits; the (possibly reloaded) agent and the log positions. A run whose
        end is among its pending events is sealed on the agent in the same commit (RunSealed:
        its stream's final version and hash), whether it ends first time or after resuming."""
        for run in runs:
            if any(isinstance(e, ev.RunEnded) for e in run.pending_events):
                self.ledger.seal(agent, run)
        mine = len(agent.pending_events)
        agent, positions = self.ledger.append_rebasing(agent, *runs, over=over, ours=self._ours)
        self.seen(agent)
        self._ours.update(range(agent.version - mine + 1, agent.version + 1))
        if len(self._ours) > OWN_COMMITS_KEPT:
            self._ours = {v for v in self._ours if v > agent.version - OWN_COMMITS_KEPT}
        return agent, positions


async def stand_down(
    progress: RunProgress,
    load_run: Callable[[UUID], Awaitable[Run]],
    commit: Callable[[], Awaitable[None]],
) -> None:
    """Another writer appended to this agent's stream first (two hosts for one agent), or a
    commit failed for want of the database, so the failed commit — and everything recorded
    since the last good one — is not in the ledger. If this run's stream is still exactly as
    this writer left it, end it there with RunFailed (contiguous versions, one end event); if
    nothing of it is stored yet, or another writer is running it, leave it to the new owner."""
    if progress.committed == 0:  # nothing of it is stored: the new owner runs it
        return
    stored = await load_run(progress.run.id)
    if stored.version != progress.committed:
        return
    progress.agent.collect_events()  # recorded since the last good commit: not in the ledger
    progress.run = stored
    why = (
        f"a commit failed ({progress.lost_commit})"
        if progress.lost_commit
        else "another host took over this agent"
    )
    stored.end(
        ev.RunFailed,
        error=f"{why}; the run stopped at its last commit",
        **progress.totals(),
    )
    with contextlib.suppress(StreamConflict):  # it took over this run meanwhile
        await commit()
