"""The runs of an agent a restarted host picks up again (``ledger.resumable``): interrupted,
parked and answered, queued and never started. Queries over the agent's run streams that only
a host placing the agent asks, so they are not the ledger's everyday API."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from events import catalog as ev
from events.agent import Agent
from events.ledger_store import LedgerStore
from events.run import Run
from events.streams import run_stream_id


class ResumableRuns:
    """What an agent left unfinished when its process stopped."""

    def __init__(
        self,
        store: LedgerStore,
        load_run: Callable[[UUID], Run],
        archived: Callable[[UUID], object | None],
    ):
        """``load_run``: the ledger's, to read a run's state; ``archived``: what archived a
        run (None: it is not), whose rows are gone while it has ended."""
        self._store = store
        self._load_run = load_run
        self._archived = archived

    def interrupted_run(self, agent: Agent) -> UUID | None:
        """The agent's latest started run if it has no end event and is not parked for an
        approval (its process stopped mid-run). Runs of an agent run one at a time, so only
        the latest started one can be open."""
        for run_no in range(agent.state.run_count, 0, -1):
            run_id = run_stream_id(agent.agent_id, run_no)
            if self._store.recorder.select_events(run_id, limit=1):
                state = self._load_run(run_id).state
                return None if state.ended or state.status == "parked" else run_id
            if self._archived(run_id) is not None:  # archived runs have ended
                return None
        return None

    def answered_parked_runs(self, agent: Agent) -> list[UUID]:
        """Runs parked for an approval that has been answered (or expired) since, for a
        sub-agent whose run has ended, or for another agent's reply that came (or did not in
        time): to resume."""
        answered = {a.run_id for a in agent.state.approvals.values() if a.status != "pending"}
        answered |= {s.run_id for s in agent.state.spawns.values() if s.wait and s.finished}
        answered |= {r.run_id for r in agent.state.replies.values() if r.answered}
        return [r for r in sorted(answered) if self._load_run(r).state.status == "parked"]

    def unstarted_runs(self, agent: Agent) -> list[ev.RunQueued]:
        """Queued runs that never started (their process stopped first), oldest first."""
        queued = {e.run_no: e for e in self._store.stream(agent.id) if isinstance(e, ev.RunQueued)}
        waiting = []
        for run_no in range(agent.state.run_count, 0, -1):
            run_id = run_stream_id(agent.agent_id, run_no)
            if self._store.recorder.select_events(run_id, limit=1) or self._archived(run_id):
                break
            waiting.append(queued[run_no])
        return waiting[::-1]
