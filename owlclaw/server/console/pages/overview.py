"""The overview page: the last week at a glance, from the views (``owlclaw.server.overview.week``):
runs, tool calls, tokens and cost per day stacked by agent (the busiest SERIES agents of the
week, the others together), timer lateness per day, and each projection's lag now."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from aiohttp import web

from owlclaw.server.console.charts import Chart, stacked
from owlclaw.server.console.render import render
from owlclaw.server.overview import Week, week
from owlclaw.server.service import Service
from projections.runs import DayOfAgent

SERIES = 6
OTHERS = "other agents"


@dataclass
class Totals:
    runs: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    def add(self, row: DayOfAgent | Totals) -> None:
        self.runs += row.runs
        self.tool_calls += row.tool_calls
        self.tokens += row.tokens
        self.cost_usd += row.cost_usd


@dataclass(frozen=True)
class Metric:
    field: str
    title: str
    shown: Callable[[float], str]


METRICS = (
    Metric("runs", "Runs", lambda v: f"{v:.0f}"),
    Metric("tool_calls", "Tool calls", lambda v: f"{v:.0f}"),
    Metric("tokens", "Tokens", lambda v: f"{v:.0f}"),
    Metric("cost_usd", "Cost", lambda v: f"${v:.4f}"),
)


def by_series(seen: Week) -> dict[str, dict[date, Totals]]:
    """Each charted agent's totals per day, the busiest (most runs in the week) first; the other
    agents' together last."""
    runs: Counter[str] = Counter()
    for row in seen.runs:
        runs[row.agent_id] += row.runs
    busiest = sorted(runs, key=lambda agent: (-runs[agent], agent))[:SERIES]
    series: dict[str, dict[date, Totals]] = {agent: {} for agent in busiest}
    for row in seen.runs:
        name = row.agent_id if row.agent_id in busiest else OTHERS
        series.setdefault(name, {}).setdefault(row.day, Totals()).add(row)
    return series


def metric_chart(days: list[date], series: dict[str, dict[date, Totals]], m: Metric) -> Chart:
    values = {
        name: {day: float(getattr(totals, m.field)) for day, totals in by_day.items()}
        for name, by_day in series.items()
    }
    return stacked(
        m.field,
        f"{m.title} per day",
        days,
        values,
        lambda _, v: m.shown(v),
        lambda name, day, v: f"{name} · {day} · {m.title}: {m.shown(v)}",
    )


def lateness_chart(seen: Week) -> Chart:
    fires = {f.day: f for f in seen.fires}
    return stacked(
        "lateness",
        "Timer lateness: the slowest fire of each day",
        seen.days,
        {"slowest fire": {day: f.max_s for day, f in fires.items()}},
        lambda day, v: f"{v:.2f} s" if day in fires else "no fires",
        lambda _, day, v: (
            f"{day} · fires: {fires[day].fires}, median lateness {fires[day].median_s:.3f} s,"
            f" slowest {v:.3f} s"
        ),
    )


def routes(service: Service) -> list[web.RouteDef]:
    async def overview(request: web.Request) -> web.Response:
        seen = await asyncio.to_thread(week, service)
        series = by_series(seen)
        total = Totals()
        for days in series.values():
            for totals in days.values():
                total.add(totals)
        rows = [(d, s, t) for d in seen.days for s, days in series.items() if (t := days.get(d))]
        return render(
            request,
            "overview.html",
            week=seen,
            charts=[*(metric_chart(seen.days, series, m) for m in METRICS), lateness_chart(seen)],
            rows=rows,
            total=total,
            lag_peak=max((p.lag_events for p in seen.projections), default=0) or 1,
        )

    return [web.get("/overview", overview)]
