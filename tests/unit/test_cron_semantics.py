"""Cron times (croniter, as the timer service uses it) against a brute-force reading of standard
5-field cron: minute hour day-of-month month day-of-week, UTC, and day-of-month OR day-of-week
when both are restricted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.timers.fires import GRACE, cron_times, plan
from projections.schedules import next_fire

FIELDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]


@st.composite
def field(draw: st.DrawFn, low: int, high: int) -> str:
    kind = draw(st.sampled_from(["*", "n", "range", "step", "list"]))
    if kind == "*":
        return "*"
    a = draw(st.integers(low, high))
    if kind == "n":
        return str(a)
    if kind == "range":
        b = draw(st.integers(a, high))
        return f"{a}-{b}"
    if kind == "step":
        return f"*/{draw(st.integers(1, max(1, (high - low) // 2)))}"
    values = draw(st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True))
    return ",".join(map(str, sorted(values)))


def allowed(spec: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for part in spec.split(","):
        if part == "*":
            values |= set(range(low, high + 1))
        elif part.startswith("*/"):
            values |= set(range(low, high + 1, int(part[2:])))
        elif "-" in part:
            a, b = map(int, part.split("-"))
            values |= set(range(a, b + 1))
        else:
            values.add(int(part))
    return values


def matches(expression: str, t: datetime) -> bool:
    parts = expression.split()
    sets = [allowed(p, lo, hi) for p, (lo, hi) in zip(parts, FIELDS, strict=True)]
    dom_ok, dow_ok = t.day in sets[2], (t.isoweekday() % 7) in sets[4]
    day_ok = (dom_ok or dow_ok) if parts[2] != "*" and parts[4] != "*" else (dom_ok and dow_ok)
    return t.minute in sets[0] and t.hour in sets[1] and t.month in sets[3] and day_ok


expressions = st.tuples(*(field(lo, hi) for lo, hi in FIELDS)).map(" ".join)
starts = st.datetimes(
    min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=200, deadline=None)
@given(expression=expressions, start=starts)
def test_fire_times_follow_standard_cron_semantics(expression: str, start: datetime) -> None:
    until = start + timedelta(days=3)
    expected = []
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t <= until and len(expected) < 50:
        if matches(expression, t):
            expected.append(t)
        t += timedelta(minutes=1)
    got = cron_times(expression, start, until)[:50]
    assert got == expected
    if expected:
        assert next_fire(expression, start) == expected[0]


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=30, unique=True),
    policy=st.sampled_from(["catch_up", "coalesce", "skip"]),
    window=st.integers(0, 10_000),
)
def test_misfire_plan_accounts_for_every_due_fire(
    offsets: list[int], policy: str, window: int
) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    due = sorted(now - timedelta(seconds=s) for s in offsets)
    decided = plan(due, now, policy, timedelta(seconds=window))
    assert sorted(t for t, _ in decided) == due  # nothing dropped, nothing invented
    for t, missed in decided:
        late, inside = now - t > GRACE, now - t <= timedelta(seconds=window)
        if not late:
            assert missed is None
        elif policy == "skip" or not inside:
            assert missed is not None
    fired_late = [t for t, missed in decided if missed is None and now - t > GRACE]
    if policy == "coalesce":
        assert len(fired_late) <= 1
