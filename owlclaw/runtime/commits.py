"""Where a run's events go: the commit pipeline (to the ledger, as the agent's writer, in
order, a tool step's request committing behind the run), or a collection (an audit replay,
which commits nowhere).

Each commit carries [result of step k, LLM response k+1, request k+1], so a tool step costs one
commit. A commit that may go behind is submitted to the ledger thread and settled by the next
one; the outcome of a tool acting outside the ledger, and the run's end, are always waited for.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Protocol

from events import Ledger, LedgerUnavailable
from events import catalog as ev
from events.agent import Agent
from events.run import Run
from owlclaw.runtime.fencing import FOREIGN_FACTS, AgentWriter
from owlclaw.runtime.progress import InFlight, RunProgress
from owlclaw.runtime.serial import LedgerCalls


class Sink(Protocol):
    """Where the events a run records go."""

    async def append(
        self,
        agent: Agent,
        *runs: Run,
        over: tuple[type[ev.LedgerEvent], ...] | None = FOREIGN_FACTS,
    ) -> tuple[Agent, list[int]]: ...

    async def commit(self, state: RunProgress, *, behind: bool = False) -> None: ...

    async def commit_run(self, state: RunProgress) -> None: ...


class Commits:
    """The commit pipeline of one agent: its writer's appends on its ledger thread."""

    def __init__(self, ledger: Ledger, writer: AgentWriter, io: LedgerCalls):
        self.ledger = ledger
        self.writer = writer
        self.io = io

    async def append(
        self,
        agent: Agent,
        *runs: Run,
        over: tuple[type[ev.LedgerEvent], ...] | None = FOREIGN_FACTS,
    ) -> tuple[Agent, list[int]]:
        """Commit as the agent's writer, rebasing over what other writers may append (``over``)
        and over this runtime's own commits: a trigger it accepts while the agent's run is
        between steps is queued behind that run, not taken for a second host."""
        return await self.io(partial(self.writer.append, over=over), agent, *runs)

    async def commit(self, state: RunProgress, *, behind: bool = False) -> None:
        """Make what the run recorded durable, after any commit still in flight (one ledger
        thread keeps commits in order). ``behind``: the run may go on while it completes, for
        the request of a tool whose only effect is ledger events (they commit after it in any
        case). Only run events go behind, since a commit of the agent may rebase it."""
        await self.settle(state)
        if behind and not state.agent.pending_events and not _outside_outcomes(state):
            events = state.run.collect_events()
            if events:
                state.in_flight = (
                    events,
                    self.io.submit(self._append_run, state.agent, state.run, events),
                )
            return
        state.in_flight = (
            state.run.pending_events,
            self.io.submit(self.writer.append, state.agent, state.run),
        )
        await self.settle(state)

    async def commit_run(self, state: RunProgress) -> None:
        """Make the run's events recorded so far durable while other calls of its batch still
        run (an outcome as it finishes): collected here, on the event loop, so those calls may
        record theirs meanwhile; callers serialize these commits. Nothing while the agent has
        events pending: they commit with the run's next commit, as ``commit`` does them."""
        await self.settle(state)
        if state.agent.pending_events:
            return
        events = state.run.collect_events()
        if events:
            state.in_flight = (
                events,
                self.io.submit(self._append_run, state.agent, state.run, events),
            )
            await self.settle(state)

    def _append_run(
        self, agent: Agent, run: Run, events: list[ev.LedgerEvent]
    ) -> tuple[Agent, list[int]]:
        """Append run events alone (the agent is returned as it was: nothing of it commits)."""
        return agent, self.ledger.append_events(events, (run,))

    async def settle(self, state: RunProgress) -> None:
        """Wait for the commit in flight; its failure (a conflict, the database gone) is the
        run's, raised here as if the commit had been waited for."""
        if state.in_flight is None:
            return
        (events, append), state.in_flight = state.in_flight, None
        try:
            await asyncio.shield(append)
        except asyncio.CancelledError:
            # The append goes on in the ledger thread with the run's events: settle it before
            # the caller records the run's end on the same aggregates, so that end commits
            # after what the append stored, or is refused if it failed (no version is skipped).
            await asyncio.wait([append])
            raise
        finally:
            if append.done():
                _settled(state, events, append)


class Collected:
    """An audit replay's sink: the events the run would have committed, in order."""

    def __init__(self) -> None:
        self.produced: list[ev.LedgerEvent] = []

    async def append(
        self,
        agent: Agent,
        *runs: Run,
        over: tuple[type[ev.LedgerEvent], ...] | None = FOREIGN_FACTS,
    ) -> tuple[Agent, list[int]]:
        self.produced += agent.collect_events()
        for run in runs:
            self.produced += run.collect_events()
        return agent, []

    async def commit(self, state: RunProgress, *, behind: bool = False) -> None:
        self.produced += state.agent.collect_events() + state.run.collect_events()

    async def commit_run(self, state: RunProgress) -> None:
        if not state.agent.pending_events:
            self.produced += state.run.collect_events()


def _settled(state: RunProgress, events: list[ev.LedgerEvent], append: InFlight) -> None:
    """Account for a finished commit: stored (also when the database acknowledged it only
    after the connection broke), or lost for want of the database."""
    failed = append.exception()
    if failed is None:
        _committed(state, events, *append.result())
    elif isinstance(failed, LedgerUnavailable):
        if failed.committed:
            _committed(state, events, state.agent, [])
        else:
            state.lost_commit = str(failed)


def _committed(
    state: RunProgress, committed: list[ev.LedgerEvent], agent: Agent, positions: list[int]
) -> None:
    state.agent = agent
    state.events += committed
    runs = [e.originator_version for e in committed if e.originator_id == state.run.id]
    state.committed = max(runs, default=state.committed)
    if positions:
        state.position = positions[-1]


def _outside_outcomes(state: RunProgress) -> bool:
    """Whether an outcome of a tool that acts outside the ledger is pending: it is made durable
    before the run goes on, so a crash does not leave an effect that happened unrecorded."""
    for e in state.run.pending_events:
        if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut):
            tool = state.tools.get(e.tool)
            if tool is None or not tool.spec.effect_in_ledger:
                return True
    return False
