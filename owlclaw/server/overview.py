"""Registered agents at a glance, a page at a time: where each lives, what it is doing, what it
spent today against its budget, its next timer and its pending inbound events (the console's
agents page). A page costs the same with ten agents registered or 100,000: the agents view
lists it by id, and only its agents are loaded.

And the last week at a glance (the console's overview page): runs, tool calls, tokens and cost
per agent and day, timer lateness per day, each projection's lag now; all read from the views."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Set
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

import msgspec

from events import Ledger, LedgerReadError, UnknownAgent
from owlclaw.app import AgentApp
from owlclaw.reports.inspection import projections_status
from owlclaw.server.service import Service
from owlclaw.tools.governance import Governance, spent_today
from projections import AgentsView, ProjectionStatus, RunsView, SchedulesView, View
from projections.agents import MAX_PAGE, PAGE_SIZE
from projections.runs import DayOfAgent
from projections.schedules import DayOfFires

AgentState = Literal["idle", "running", "parked", "passivated", "unreadable"]
CATCH_UP_S = 2.0
"""How long a page waits for a view to read what was committed so far."""
WEEK_DAYS = 7
Visible = Callable[[str], bool]
"""Whether an agent is listed (in the principal's scope)."""


class AgentOverview(msgspec.Struct, frozen=True):
    agent_id: str
    placement: str
    host: str
    state: AgentState
    runs: int
    runs_today: int
    tokens_today: int
    cost_today_usd: float
    daily_tokens: int | None
    daily_cost_usd: float | None
    next_timer: datetime | None
    pending_events: int
    served: bool = True
    """Served by this server (its runs page is here); False for an agent only registered."""
    app_error: str | None = None
    app_warning: str | None = None
    """Why the app on disk does not load while its previous version serves."""
    unreadable: str | None = None
    """Why the agent's stream could not be read (e.g. a corrupt event; `owlclaw verify`)."""


class AgentsPage(msgspec.Struct, frozen=True):
    agents: list[AgentOverview]
    next_after: str | None
    """The cursor of the next page (its ``after``); None after the last page."""
    registered: int | None
    """How many agents are registered; None on a page of the agents in a principal's scope."""


def host_of(placement: str) -> str:
    return "this process" if placement == "local" else f"Ray actor ({placement})"


async def agent_overviews(
    service: Service,
    after: str | None = None,
    limit: int = PAGE_SIZE,
    visible: Visible | None = None,
) -> AgentsPage:
    """Up to ``limit`` registered agents by id (those ``visible`` keeps), after ``after``: its
    host's activity, its stream, the runs and schedules views."""
    activity = (await service.agents.status()).agents
    running = {a for a, act in activity.items() if act.running}
    return await asyncio.to_thread(_page, service, after, limit, set(activity), running, visible)


def caught_up(service: Service, view: View) -> None:
    """Wait (at most CATCH_UP_S) for ``view`` to absorb what is committed now, so that a page
    shows what was just recorded."""
    assert service.ledger is not None
    runner = next((r for r in service.projections if r.view is view), None)
    if runner is not None:
        runner.wait_for(service.ledger.log.last_committed(), CATCH_UP_S)


def _page(
    service: Service,
    after: str | None,
    limit: int,
    active: set[str],
    running: set[str],
    visible: Visible | None,
) -> AgentsPage:
    assert service.ledger is not None
    agents = service.view(AgentsView)
    caught_up(service, agents)  # list an agent registered a moment ago too
    return overview_page(
        service.ledger,
        (agents, service.view(RunsView), service.view(SchedulesView)),
        service.apps,
        service.config.runtime.placement,
        after,
        limit,
        active=active,
        running=running,
        visible=visible,
    )


def visible_ids(
    agents: AgentsView, after: str | None, limit: int, visible: Visible | None
) -> tuple[list[str], str | None]:
    """Up to ``limit`` agent ids after ``after`` (those ``visible`` keeps, read MAX_PAGE at a
    time) and the next page's cursor."""
    if visible is None:
        ids = [row.agent_id for row in agents.page(after, limit)]
        return ids, ids[-1] if len(ids) == limit else None
    ids, cursor = [], after
    while len(ids) < limit:
        rows = agents.page(cursor, MAX_PAGE)
        ids += [row.agent_id for row in rows if visible(row.agent_id)]
        if len(rows) < MAX_PAGE:  # the last agents: a next page only for those left over
            return ids[:limit], ids[limit - 1] if len(ids) > limit else None
        cursor = rows[-1].agent_id
    return ids[:limit], ids[limit - 1]


def overview_page(
    ledger: Ledger,
    views: tuple[AgentsView, RunsView, SchedulesView],
    apps: Mapping[str, AgentApp],
    placement: str,
    after: str | None,
    limit: int,
    *,
    active: Set[str] = frozenset(),
    running: Set[str] = frozenset(),
    visible: Visible | None = None,
) -> AgentsPage:
    """The page of registered agents after ``after`` (only those ``visible`` keeps, when
    given): those of ``apps`` are served here with ``placement``, ``active`` ones are hosted
    now, ``running`` ones run now."""
    agents, runs_view, schedules = views
    ids, next_after = visible_ids(agents, after, limit, visible)
    today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
    runs_today = runs_view.started_since(today, ids)
    next_timers = schedules.next_fires(ids)
    found = []
    for agent_id in ids:
        app = apps.get(agent_id)
        governance = Governance.from_app_config(app.config) if app is not None else None
        state: AgentState = "passivated"
        runs = tokens = pending_events = 0
        cost, app_error, app_warning, unreadable = 0.0, None, None, None
        try:
            agent = ledger.load_agent(agent_id)
            tokens, cost = spent_today(ledger, agent, today.date())
        except UnknownAgent:
            continue
        except LedgerReadError as e:  # a corrupt stream: shown on its row, the others still are
            state, unreadable = "unreadable", f"{e} (run `owlclaw verify {agent_id}`)"
        else:
            if agent_id in running:
                state = "running"
            elif any(a.status == "pending" for a in agent.state.approvals.values()):
                state = "parked"
            elif agent_id in active:
                state = "idle"
            runs, pending_events = agent.state.run_count, agent.state.pending_inbound
            app_error, app_warning = agent.state.app_error, agent.state.app_warning
        found.append(
            AgentOverview(
                agent_id=agent_id,
                placement=placement,
                host=host_of(placement) if app is not None else "not served here",
                state=state,
                runs=runs,
                runs_today=runs_today.get(agent_id, 0),
                tokens_today=tokens,
                cost_today_usd=cost,
                daily_tokens=governance.daily_tokens if governance else None,
                daily_cost_usd=governance.daily_cost_usd if governance else None,
                next_timer=next_timers.get(agent_id),
                pending_events=pending_events,
                served=app is not None,
                app_error=app_error,
                app_warning=app_warning,
                unreadable=unreadable,
            )
        )
    return AgentsPage(
        agents=found,
        next_after=next_after,
        registered=agents.count() if visible is None else None,
    )


class Week(msgspec.Struct, frozen=True):
    days: list[date]
    """The UTC days shown, oldest first; the last is today."""
    runs: list[DayOfAgent]
    """Each agent's runs per day (those with none are left out)."""
    fires: list[DayOfFires]
    projections: list[ProjectionStatus]
    registered: int


def week(service: Service, days: int = WEEK_DAYS) -> Week:
    """The last ``days`` UTC days, up to now, from the runs and schedules views, the projections'
    status and the agents view."""
    assert service.ledger is not None
    first = datetime.now(UTC).date() - timedelta(days=days - 1)
    since = datetime.combine(first, time(), UTC)
    runs, schedules = service.view(RunsView), service.view(SchedulesView)
    caught_up(service, runs)
    caught_up(service, schedules)
    return Week(
        days=[first + timedelta(days=n) for n in range(days)],
        runs=runs.daily(since),
        fires=schedules.lateness(since),
        projections=projections_status(service.ledger, service.views),
        registered=service.view(AgentsView).count(),
    )
