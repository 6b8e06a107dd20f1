"""Each served agent at a glance: where it lives, what it is doing, what it spent today against
its budget, its next timer and its pending inbound events (the console's agents page)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, time
from typing import Literal

import msgspec

from events import LedgerReadError, UnknownAgent
from owlclaw.runtime.governance import Governance, spent_today
from owlclaw.service import Service
from projections import RunsView, SchedulesView

AgentState = Literal["idle", "running", "parked", "passivated"]


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
    app_error: str | None = None
    unreadable: str | None = None
    """Why the agent's stream could not be read (e.g. a corrupt event; `owlclaw verify`)."""


def host_of(placement: str) -> str:
    return "this process" if placement == "local" else f"Ray actor ({placement})"


async def agent_overviews(service: Service) -> list[AgentOverview]:
    """Every served agent: its host's activity, its stream, the runs and schedules views."""
    activity = (await service.agents.status()).agents
    return await asyncio.to_thread(
        _overviews, service, set(activity), {a for a, act in activity.items() if act.running}
    )


def _overviews(service: Service, active: set[str], running: set[str]) -> list[AgentOverview]:
    assert service.ledger is not None
    today = datetime.combine(datetime.now(UTC).date(), time(), UTC)
    runs_today = service.view(RunsView).started_since(today)
    next_timers = service.view(SchedulesView).next_fires()
    placement = service.config.runtime.placement
    found = []
    for agent_id, app in service.apps.items():
        governance = Governance.from_app_config(app.config)
        state: AgentState = "passivated"
        runs = tokens = pending_events = 0
        cost, app_error, unreadable = 0.0, None, None
        try:
            agent = service.ledger.load_agent(agent_id)
            tokens, cost = spent_today(service.ledger, agent, today.date())
        except UnknownAgent:
            continue
        except LedgerReadError as e:  # a corrupt stream: shown on its row, the others still are
            unreadable = f"{e} (run `owlclaw verify {agent_id}`)"
        else:
            if agent_id in running:
                state = "running"
            elif any(a.status == "pending" for a in agent.state.approvals.values()):
                state = "parked"
            elif agent_id in active:
                state = "idle"
            runs, pending_events = agent.state.run_count, agent.state.pending_inbound
            app_error = agent.state.app_error
        found.append(
            AgentOverview(
                agent_id=agent_id,
                placement=placement,
                host=host_of(placement),
                state=state,
                runs=runs,
                runs_today=runs_today.get(agent_id, 0),
                tokens_today=tokens,
                cost_today_usd=cost,
                daily_tokens=governance.daily_tokens,
                daily_cost_usd=governance.daily_cost_usd,
                next_timer=next_timers.get(agent_id),
                pending_events=pending_events,
                app_error=app_error,
                unreadable=unreadable,
            )
        )
    return found
