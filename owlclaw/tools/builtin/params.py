"""Parameters of the built-in tools, with the bounds of the built-in tools specification."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec
from croniter import croniter

from projections.schedules import NeverFires, next_fire

MIN_DELAY_SECONDS, MAX_DELAY_SECONDS = 1, 2_592_000
MIN_CRON_INTERVAL_SECONDS = 60

Focus = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=500,
        description="What to focus on in the run (e.g. 'check entry opportunities')",
    ),
]
DecisionType = Literal["capability_selection", "schedule_decision", "no_action", "other"]


class Params(msgspec.Struct, forbid_unknown_fields=True):
    """Base of tool parameters: unknown fields are rejected, not ignored."""


class ScheduleOnce(Params):
    delay_seconds: Annotated[
        int,
        msgspec.Meta(
            ge=MIN_DELAY_SECONDS,
            le=MAX_DELAY_SECONDS,
            description="Delay in seconds before the next run (1 to 2592000, i.e. 30 days)",
        ),
    ]
    focus: Focus


class ScheduleCron(Params):
    cron_expression: Annotated[
        str,
        msgspec.Meta(
            min_length=9,
            max_length=100,
            description="5-field cron 'minute hour day month weekday' in UTC, "
            "e.g. '0 9 * * 1-5'; at most once a minute",
        ),
    ]
    focus: Focus


class ListSchedules(Params):
    kind: Annotated[
        Literal["once", "cron"] | None,
        msgspec.Meta(description="Only schedules of this kind; all when omitted"),
    ] = None


class LoadSkill(Params):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200, description="A skill's name")]


class CancelSchedule(Params):
    schedule_id: Annotated[
        str,
        msgspec.Meta(
            min_length=1, max_length=100, description="The id schedule_once/schedule_cron returned"
        ),
    ]


class Remember(Params):
    content: Annotated[
        str, msgspec.Meta(min_length=1, max_length=2000, description="What to remember")
    ]
    tags: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=50)]],
        msgspec.Meta(max_length=20, description="Optional tags, e.g. ['trading', 'lesson']"),
    ] = []


class Recall(Params):
    query: Annotated[
        str, msgspec.Meta(min_length=1, max_length=1000, description="What to search memory for")
    ]
    limit: Annotated[
        int, msgspec.Meta(ge=1, le=20, description="Maximum memories to return (1 to 20)")
    ] = 5


class Forget(Params):
    memory_id: Annotated[
        UUID,
        msgspec.Meta(description="The id remember returned (recall and the prompt show it)"),
    ]


class QueryState(Params):
    state_name: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[A-Za-z0-9_]+$",
            min_length=1,
            max_length=100,
            description="Name of the state to query, e.g. 'market_state'",
        ),
    ]


class LogDecision(Params):
    reasoning: Annotated[
        str, msgspec.Meta(min_length=1, max_length=1000, description="Why you decided this")
    ]
    decision_type: DecisionType = "other"


class CronError(ValueError):
    """A cron expression that is not standard 5-field cron, or that never fires."""


CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
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
    if not croniter.is_valid(expression):
        raise CronError(f"invalid cron expression {expression!r}")
    try:
        next_fire(expression, datetime.now(UTC))
    except NeverFires as e:
        raise CronError(f"{e} (a date that does not exist, like Feb 30?)") from e
