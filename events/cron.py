"""Cron, the one place that reads it: which expressions a schedule accepts, and when one fires.

A schedule's cron is standard 5-field cron (minute hour day-of-month month day-of-week) in UTC,
as Hatchet's engine reads it. croniter computes the fire times, on the expression rewritten to
read with those standard semantics (``canonical_cron``). The views, the timer service and the
schedule_cron tool all ask here, so they agree on every fire. croniter is imported where it
computes (0.13 s): a process that reads the schedules view without computing a fire never pays it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

MIN_CRON_INTERVAL_SECONDS = 60
CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
FIRE_HORIZON_YEARS = 5
"""A 5-field expression that fires at all fires within 4 years (Feb 29; only around 2100, not a
leap year, is the gap 8): an expression without a fire in 5 years never fires."""
MAX_MISSED_LISTED = 1000
"""Missed cron fires enumerated after a downtime; older ones are summarised in one miss."""


class CronError(ValueError):
    """A cron expression that is not standard 5-field cron, or that never fires."""


class NeverFires(CronError):
    """A cron expression without a fire time in the next FIRE_HORIZON_YEARS (e.g. Feb 30)."""


_NAMES = {
    3: "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec",
    4: "sun|mon|tue|wed|thu|fri|sat",
}


def _standard_item(index: int) -> re.Pattern[str]:
    """One comma-separated item of a standard field: ``*``, a value or a range, each with an
    optional ``/step``; names only for months and weekdays."""
    value = r"\d+" + (f"|{_NAMES[index]}" if index in _NAMES else "")
    return re.compile(rf"(?:\*|(?:{value})(?:-(?:{value}))?)(?:/\d+)?", re.IGNORECASE)


_STANDARD_ITEMS = tuple(_standard_item(index) for index in range(len(CRON_FIELDS)))
_SINGLE_RANGE = re.compile(r"^(\d+)-\1(?:/\d+)?$")
_DAY_FIELDS = {2: "1-31", 4: "0-6"}


def check_cron(expression: str) -> None:
    """Accept a standard 5-field expression (UTC) that fires. Minute resolution means no such
    expression fires more often than every 60 s; a 6-field (seconds) expression is refused for
    that. croniter's extensions (``L``, ``W``, ``#``, ``?``, ``H``, ``R``, a year field) are
    refused: the Hatchet engine reads standard cron only."""
    fields = expression.split()
    if len(fields) == 6:
        raise CronError(
            f"cron expression {expression!r} has a seconds field; schedules fire at most once "
            f"every {MIN_CRON_INTERVAL_SECONDS} s, so use 5 fields: minute hour day month weekday"
        )
    if len(fields) != 5:
        raise CronError(f"cron expression must have 5 fields, got {len(fields)}: {expression!r}")
    for name, field, item in zip(CRON_FIELDS, fields, _STANDARD_ITEMS, strict=True):
        if not all(item.fullmatch(part) for part in field.split(",")):
            raise CronError(
                f"invalid cron expression {expression!r}: {name} field {field!r} is not "
                "standard cron (use numbers, names, '*', ',', '-' and '/'; L, W, #, ?, H and R "
                "are not supported)"
            )
    from croniter import croniter

    if not croniter.is_valid(expression):
        raise CronError(f"invalid cron expression {expression!r}")
    try:
        next_fire(expression, datetime.now(UTC))
    except NeverFires as e:
        raise CronError(f"{e} (a date that does not exist, like Feb 30?)") from e


def canonical_cron(expression: str) -> str:
    """The expression in a form croniter reads with standard (POSIX) semantics, as Hatchet's
    engine does; tests/unit/test_cron.py found both differences:

    - a one-value range (``5-5``) is read by croniter as ``*``: written as the value;
    - a stepped day field (``*/2``) counts as unrestricted for croniter, so day-of-month and
      day-of-week were ANDed; POSIX ORs two restricted day fields: written as ``1-31/2``.
    """
    fields = []
    for index, field in enumerate(expression.split()):
        parts = [m.group(1) if (m := _SINGLE_RANGE.match(p)) else p for p in field.split(",")]
        if index in _DAY_FIELDS:
            parts = [_DAY_FIELDS[index] + p[1:] if p.startswith("*/") else p for p in parts]
        fields.append(",".join(parts))
    return " ".join(fields)


def next_fire(cron: str, after: datetime) -> datetime:
    """The first fire strictly after ``after`` for a 5-field cron expression (UTC); raises
    NeverFires when there is none within FIRE_HORIZON_YEARS."""
    from croniter import CroniterError, croniter

    it = croniter(canonical_cron(cron), after, max_years_between_matches=FIRE_HORIZON_YEARS)
    try:
        fire: datetime = it.get_next(datetime)
    except CroniterError as e:
        raise NeverFires(
            f"cron expression {cron!r} never fires: no fire time in the next "
            f"{FIRE_HORIZON_YEARS} years"
        ) from e
    return fire


def next_fire_if_any(cron: str, after: datetime) -> datetime | None:
    """``next_fire``, or None when the expression never fires or croniter cannot read it: such
    an expression, accepted by an older schedule_cron, stays in the log for good, and a view
    must not stop on it."""
    from croniter import CroniterError

    try:
        return next_fire(cron, after)
    except (NeverFires, CroniterError):
        return None


def cron_times(expression: str, after: datetime, until: datetime) -> list[datetime]:
    """Fire times of a 5-field cron expression in (after, until], UTC, at most MAX_MISSED_LISTED:
    the fires a timer missed while no worker ran. An expression that never fires ("0 0 30 2 *":
    scheduling refuses it, an older ledger may hold one) has none."""
    from croniter import CroniterBadDateError, croniter

    times: list[datetime] = []
    it = croniter(canonical_cron(expression), after)
    while len(times) < MAX_MISSED_LISTED:
        try:
            t: datetime = it.get_next(datetime)
        except CroniterBadDateError:
            break
        if t > until:
            break
        times.append(t)
    return times
