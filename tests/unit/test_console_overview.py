"""The overview's charts: the busiest agents are drawn, the others together; bars stack by
series, scaled to the busiest day, each keeping its value in its title."""

from __future__ import annotations

from datetime import date, timedelta

from owlclaw.server.console.charts import BOTTOM, HEIGHT, TOP, stacked
from owlclaw.server.console.pages.overview import OTHERS, SERIES, by_series
from owlclaw.server.overview import Week
from projections.runs import DayOfAgent

DAY = date(2026, 11, 27)


def test_the_busiest_agents_are_series_of_their_own_and_the_others_are_added_up() -> None:
    rows = [DayOfAgent(f"agent-{n}", DAY, n + 1, n, 100 * n, 0.5) for n in range(SERIES + 2)]
    series = by_series(Week([DAY], rows, [], [], len(rows)))
    assert list(series) == [f"agent-{n}" for n in range(SERIES + 1, 1, -1)] + [OTHERS]
    others = series[OTHERS][DAY]
    assert (others.runs, others.tool_calls, others.tokens, others.cost_usd) == (3, 1, 100, 1.0)


def test_bars_stack_by_series_scaled_to_the_busiest_day() -> None:
    days = [DAY - timedelta(days=1), DAY]
    chart = stacked(
        "runs",
        "Runs per day",
        days,
        {"a": {DAY: 3.0, days[0]: 1.0}, "b": {DAY: 1.0}},
        lambda _, v: f"{v:g}",
        lambda s, d, v: f"{s} {d} {v:g}",
    )
    full = HEIGHT - TOP - BOTTOM
    [one, three, b] = chart.bars
    assert (three.height, b.height, one.height) == (full * 3 / 4, full / 4, full / 4)
    assert b.y + b.height == three.y  # b sits on a
    assert [bar.title for bar in chart.bars] == [f"a {days[0]} 1", f"a {DAY} 3", f"b {DAY} 1"]
    assert [d.total for d in chart.days] == ["1", "4"]
    assert [name for name, _ in chart.legend] == ["a", "b"]
    assert (chart.name, chart.title) == ("runs", "Runs per day")
