"""What the CLI and the console read: schedules, an agent's runs, projections' status and an
agent's memory, brought up to date with the log first, so both show the same thing from the
same code. Each imports the view it reads when it runs: a command reading the runs view does not
import the schedules view's cron parser or the memory view's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from owlclaw.config import OwlClawConfig
from owlclaw.reports.listings import Runs, Schedules

if TYPE_CHECKING:
    from events import Ledger, UnknownAgent
    from projections import MemoryView, RunsView, SchedulesView
    from projections.recall import RecallResult
    from projections.status import ProjectionStatus
    from projections.view import View


def bring_up_to_date(led: Ledger, view: View) -> str | None:
    """Read-your-writes: apply every event committed before this call to ``view``; the
    warning to show when an open transaction kept it from getting there."""
    from projections.current import ViewBehind, catch_up_to_committed

    try:
        catch_up_to_committed(led, view)
    except ViewBehind as e:
        return str(e)
    return None


def open_schedules(led: Ledger) -> SchedulesView:
    """The schedules view with its tables created (a served process has its own already)."""
    from projections import SchedulesView

    view = SchedulesView(led)
    view.create_table()
    return view


def schedules_of(led: Ledger, view: SchedulesView, agent: str | None, every: bool) -> Schedules:
    """An agent's (or every agent's) active schedules, with ended ones when ``every``."""
    if agent is not None:
        led.load_agent(agent)
    behind = bring_up_to_date(led, view)
    return Schedules(view.listing(agent, every), behind)


def open_runs(led: Ledger) -> RunsView:
    """The runs view with its tables created (a served process has its own already)."""
    from projections import RunsView

    view = RunsView(led)
    view.create_table()
    return view


def runs_of(led: Ledger, view: RunsView, agent: str, limit: int) -> Runs:
    """The agent's latest ``limit`` runs (UnknownAgent when there is no such agent)."""
    led.load_agent(agent)
    behind = bring_up_to_date(led, view)
    return Runs(view.of_agent(agent, limit), behind)


KNOWN_SHOWN = 20
"""Agent ids an unknown-agent error names at most."""


def with_known_agents(led: Ledger, unknown: UnknownAgent) -> str:
    """The unknown-agent error with the agents the ledger does know (the first ``KNOWN_SHOWN``)."""
    known = led.agent_ids()
    names = ", ".join(known[:KNOWN_SHOWN]) or "none yet"
    more = f" and {len(known) - KNOWN_SHOWN} more" if len(known) > KNOWN_SHOWN else ""
    return f"{unknown}; known agents: {names}{more}"


def projections_status(led: Ledger, views: Sequence[View]) -> list[ProjectionStatus]:
    """Position, lag (events and seconds behind the log head) and parked events of each view."""
    from projections.status import projection_status

    return [projection_status(led, view) for view in views]


@dataclass(frozen=True)
class MemoryReading:
    memory_md: Path
    archive: Path
    behind: str | None
    """The warning when the memory view could not be brought up to date."""
    recall: RecallResult | None
    """The memories ranked for the query (None without one)."""

    def as_json(self, agent: str, query: str | None) -> dict[str, Any]:
        """``owlclaw memory --json``'s answer, also the server's to the CLI (``GET
        /agents/{id}/memory``)."""
        result = self.recall
        return {
            "agent": agent,
            "memory_md": str(self.memory_md),
            "archive": str(self.archive),
            "warning": self.behind,
            "recall": None
            if result is None
            else {
                "query": query,
                "warning": result.warning,
                "memories": msgspec.to_builtins(result.memories),
            },
        }


def memory_of(
    led: Ledger,
    view: MemoryView,
    config: OwlClawConfig,
    agent: str,
    query: str | None,
    limit: int = 5,
) -> MemoryReading:
    """Bring the memory view up to date, write the agent's MEMORY.md, and recall ``query``
    with the relevance (similarity weighted by age) the ``recall`` tool ranks by."""
    from projections import MemoryStore
    from projections.memory_files import render_memory_files

    led.load_agent(agent)
    behind = bring_up_to_date(led, view)
    memory_md, archive = render_memory_files(view, agent, config.memory_path / agent)
    store = MemoryStore(view, half_life_days=config.memory.half_life_days)
    result = (
        store.recall(agent, query, limit=limit, min_similarity=config.runtime.recall_min_similarity)
        if query is not None
        else None
    )
    return MemoryReading(memory_md, archive, behind, result)
