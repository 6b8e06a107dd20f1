"""Charts drawn by the server: the geometry is computed here and drawn as inline SVG by
templates/chart.html, escaped like every value, with no script and nothing loaded from
elsewhere (the console works offline). Every bar keeps its value as text: its ``<title>`` (a
tooltip) and its data attributes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

WIDTH, HEIGHT = 560.0, 170.0
LEFT, TOP, BOTTOM = 8.0, 16.0, 20.0
"""Room for the days' totals above the bars and their names below."""
PALETTE = ("#2f5fd0", "#a15c07", "#067647", "#6941c6", "#0e7090", "#c11574", "#98a2b3")
"""One color per series, in order; the last for everything folded together."""


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    color: str
    series: str
    day: date
    value: float
    title: str


@dataclass(frozen=True)
class Day:
    x: float
    """The middle of the day's bar."""
    y: float
    """Just above its stack."""
    name: str
    total: str


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    bars: list[Bar]
    days: list[Day]
    legend: list[tuple[str, str]]
    """Each series with its color."""
    width: float = WIDTH
    height: float = HEIGHT
    baseline: float = HEIGHT - BOTTOM


def stacked(
    name: str,
    title: str,
    days: Sequence[date],
    values: Mapping[str, Mapping[date, float]],
    show: Callable[[date, float], str],
    describe: Callable[[str, date, float], str],
) -> Chart:
    """A bar per day, the series of ``values`` stacked bottom up in their order (at most one
    per color) with ``show`` of its total above it; ``describe`` is a bar's tooltip."""
    totals = [sum(series.get(day, 0.0) for series in values.values()) for day in days]
    scale = (HEIGHT - TOP - BOTTOM) / (max(totals, default=0.0) or 1.0)
    slot = (WIDTH - LEFT) / max(len(days), 1)
    bars, labels = [], []
    for n, day in enumerate(days):
        x, y = LEFT + n * slot + slot * 0.2, HEIGHT - BOTTOM
        for (series, by_day), color in zip(values.items(), PALETTE, strict=False):
            value = by_day.get(day, 0.0)
            if value:
                y -= value * scale
                tip = describe(series, day, value)
                bars.append(Bar(x, y, slot * 0.6, value * scale, color, series, day, value, tip))
        labels.append(Day(x + slot * 0.3, y - 4, day.strftime("%a %d %b"), show(day, totals[n])))
    legend = list(zip(values, PALETTE, strict=False))
    return Chart(name, title, bars, labels, legend)
