"""events.cron, the one module that reads cron: what schedule_cron accepts (with the reason it
refuses), and fire times against a brute-force reading of standard 5-field cron: minute hour
day-of-month month day-of-week, UTC, and day-of-month OR day-of-week when both are restricted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from events.cron import (
    MAX_MISSED_LISTED,
    CronError,
    NeverFires,
    canonical_cron,
    check_cron,
    cron_times,
    next_fire,
    next_fire_if_any,
)

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
@given(expression=expressions, start=starts)
def test_the_next_fire_is_strictly_later_on_a_minute_the_expression_matches(
    expression: str, start: datetime
) -> None:
    fire = next_fire_if_any(expression, start)
    if fire is None:
        return
    assert fire > start and (fire.second, fire.microsecond) == (0, 0)
    assert matches(expression, fire)
    assert cron_times(expression, start, fire) == [fire]  # nothing between: it is the first


@settings(max_examples=100, deadline=None)
@given(expression=expressions, start=starts)
def test_missed_fires_are_the_chain_of_next_fires(expression: str, start: datetime) -> None:
    until = start + timedelta(hours=6)
    chain: list[datetime] = []
    fire = next_fire_if_any(expression, start)
    while fire is not None and fire <= until:
        chain.append(fire)
        fire = next_fire_if_any(expression, fire)
    assert cron_times(expression, start, until) == chain


@settings(max_examples=200, deadline=None)
@given(expression=expressions)
@example(expression="0 0 30 2 *")
def test_an_expression_is_accepted_exactly_when_it_fires(expression: str) -> None:
    fires = next_fire_if_any(expression, datetime.now(UTC)) is not None
    if fires:
        check_cron(expression)
    else:
        with pytest.raises(CronError, match="never fires"):
            check_cron(expression)


@given(expression=expressions)
def test_the_canonical_form_is_a_fixed_point(expression: str) -> None:
    assert canonical_cron(canonical_cron(expression)) == canonical_cron(expression)


def test_an_expression_that_never_fires_has_no_next_fire_and_no_missed_fires() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(NeverFires, match="no fire time in the next 5 years"):
        next_fire("0 0 30 2 *", start)
    assert next_fire_if_any("0 0 30 2 *", start) is None
    assert cron_times("0 0 30 2 *", start, start + timedelta(days=800)) == []


def test_missed_fires_are_listed_up_to_their_cap() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = cron_times("* * * * *", start, start + timedelta(days=2))
    assert len(times) == MAX_MISSED_LISTED
    assert times[0] == start + timedelta(minutes=1) and times[-1] == start + timedelta(minutes=1000)


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "*/5 * * * *",
        "0 9 * * 1-5",
        "30 14 1,15 * *",
        "0 0 29 2 *",  # every leap year: within the 5-year horizon
        "0 0 30 2 1",  # Feb 30 or any Monday in February: day fields are ORed
        "0 8 1 jan-mar mon-fri",
        "5-5 1-23/2 * * 7",
    ],
)
def test_standard_cron_expressions_are_accepted(expression: str) -> None:
    check_cron(expression)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("* * * *", "5 fields"),
        ("*/10 * * * * *", "seconds field"),
        ("61 * * * *", "invalid"),
        ("a b c d e", "invalid"),
        ("", "5 fields"),
        ("0 0 * * * 2030", "seconds field"),
        ("0 0 * * * * 2030", "5 fields"),
        ("0 0 30 2 *", "never fires: no fire time in the next 5 years"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("0 0 L * *", "day-of-month field 'L' is not standard cron"),
        ("0 0 1W * *", "day-of-month field '1W' is not standard cron"),
        ("0 0 * * 1#2", "day-of-week field '1#2' is not standard cron"),
        ("0 0 * * 5L", "day-of-week field '5L' is not standard cron"),
        ("0 0 ? * 1", "day-of-month field '\\?' is not standard cron"),
        ("H 0 * * *", "minute field 'H' is not standard cron"),
        ("R 0 * * *", "minute field 'R' is not standard cron"),
        ("0 0 1 jan-mar thu#1", "day-of-week field"),
    ],
)
def test_invalid_and_too_frequent_cron_expressions_are_refused(
    expression: str, fragment: str
) -> None:
    with pytest.raises(CronError, match=fragment):
        check_cron(expression)
