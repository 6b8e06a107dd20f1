"""A tenant's spending today, read from the database every process shares, and the budget
check before each model call of its agents.

PostgreSQL: one query over the runs view (its per-run cost grows with each LLMResponded), kept
for ``REFRESH_S`` per tenant and process, so a check costs a query at most that often. The
in-memory ledger (tests, one process): the tenant's runs read from the ledger itself. The
run that checks counts with its own cost as of now, never as the view last saw it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from datetime import time as daytime
from uuid import UUID

from events import Ledger, UnknownRun
from events.streams import now, run_stream_id
from owlclaw.tenants.match import Tenant
from projections import RunsView
from projections.runs import RunCost

REFRESH_S = 2.0
"""How long a process reuses a tenant's spending before reading it again."""

Source = Callable[[date], list[RunCost]]
"""The costs of every agent's runs started on a UTC day."""


@dataclass(frozen=True)
class DaySpending:
    """What a tenant's runs started on ``day`` cost: the ended ones, and each unfinished one."""

    day: date
    ended: float
    unfinished: Mapping[UUID, float]

    @classmethod
    def of(cls, tenant: Tenant, day: date, costs: Iterable[RunCost]) -> DaySpending:
        mine = [c for c in costs if tenant.covers(c.agent_id)]
        return cls(
            day,
            sum(c.cost_usd for c in mine if c.run_id is None),
            {c.run_id: c.cost_usd for c in mine if c.run_id is not None},
        )

    def total(self, run_id: UUID, run_cost: float) -> float:
        """Today's spending with run ``run_id`` counted at ``run_cost``."""
        others = sum(cost for run, cost in self.unfinished.items() if run != run_id)
        return self.ended + others + run_cost


def view_source(view: RunsView) -> Source:
    """Costs from the runs view (PostgreSQL: every process's runs)."""
    return lambda day: view.costs_since(datetime.combine(day, daytime(), UTC))


def ledger_source(ledger: Ledger) -> Source:
    """Costs read from the ledger's runs, for a ledger without views (in memory)."""

    def costs(day: date) -> list[RunCost]:
        found = []
        for agent_id in ledger.agent_ids():
            for run_no in range(ledger.load_agent(agent_id).state.run_count, 0, -1):
                try:
                    run = ledger.load_run(run_stream_id(agent_id, run_no))
                except UnknownRun:  # queued, not started yet
                    continue
                if run.state.started_at is not None and run.state.started_at.date() < day:
                    break
                ended = None if run.state.ended else run.id
                found.append(RunCost(agent_id, ended, run.state.cost_usd))
        return found

    return costs


class TenantSpending:
    """The tenants' spending as this process last read it, read again when older than
    ``refresh_s`` or of another day. Thread-safe: agents check it from their ledger threads."""

    def __init__(
        self,
        source: Source,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._source = source
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._read: dict[str, tuple[float, DaySpending]] = {}

    def today(self, tenant: Tenant, day: date) -> DaySpending:
        with self._lock:
            cached = self._read.get(tenant.name)
            if cached and cached[1].day == day and self._clock() - cached[0] < self._refresh_s:
                return cached[1]
            spending = DaySpending.of(tenant, day, self._source(day))
            self._read[tenant.name] = (self._clock(), spending)
            return spending


class TenantBudget:
    """One agent's share of its tenant's daily cost budget."""

    def __init__(self, tenant: Tenant, spending: TenantSpending):
        self.tenant = tenant
        self._spending = spending
        self._today: DaySpending | None = None

    @property
    def limit(self) -> float | None:
        return self.tenant.config.daily_cost_usd

    def refresh(self) -> None:
        """Know today's spending (reads the database at most every ``REFRESH_S``)."""
        if self.limit is not None:
            self._today = self._spending.today(self.tenant, now().date())

    def spent_beyond(self, run_id: UUID, run_cost: float) -> float | None:
        """Today's spending when it reached the limit (the run may not call a model); None
        while under it, or before ``refresh``."""
        limit, today = self.limit, self._today
        if limit is None or today is None or today.day != now().date():
            return None
        spent = today.total(run_id, run_cost)
        return spent if spent >= limit else None
