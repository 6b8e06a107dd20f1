"""Parameters of the built-in tools, with the bounds of the built-in tools specification."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

import msgspec

MIN_DELAY_SECONDS, MAX_DELAY_SECONDS = 1, 2_592_000

Focus = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=500,
        description="What to focus on in the run (e.g. 'check entry opportunities')",
    ),
]
DecisionType = Literal["capability_selection", "schedule_decision", "no_action", "other"]
OnMissed = Annotated[
    Literal["one", "all", "skip"],
    msgspec.Meta(
        description="Fires missed while the timer service was down: 'one' fires once for them "
        "(default), 'all' fires each of them (the latest 100 at most), 'skip' fires none"
    ),
]


class Params(msgspec.Struct, forbid_unknown_fields=True):
    """Base of tool parameters: unknown fields are rejected, not ignored."""


class ScheduleOnce(Params, omit_defaults=True):
    """``on_missed`` is recorded only when given, as calls recorded before it read."""

    delay_seconds: Annotated[
        int,
        msgspec.Meta(
            ge=MIN_DELAY_SECONDS,
            le=MAX_DELAY_SECONDS,
            description="Delay in seconds before the next run (1 to 2592000, i.e. 30 days)",
        ),
    ]
    focus: Focus
    on_missed: OnMissed = "one"


class ScheduleCron(Params, omit_defaults=True):
    """``on_missed`` is recorded only when given, as calls recorded before it read."""

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
    on_missed: OnMissed = "one"


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


MAX_PLAN_ITEMS = 20
PlanStatus = Literal["pending", "in_progress", "done"]


class PlanItem(msgspec.Struct, forbid_unknown_fields=True):
    text: Annotated[
        str, msgspec.Meta(min_length=1, max_length=200, description="One step of the plan")
    ]
    status: Annotated[PlanStatus, msgspec.Meta(description="pending, in_progress or done")] = (
        "pending"
    )


class UpdatePlan(Params):
    items: Annotated[
        list[PlanItem],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_PLAN_ITEMS,
            description="The whole plan, in order (1 to 20 items); replaces the previous one",
        ),
    ]


MAX_QUESTION_CHARS, MAX_OPTIONS, MAX_OPTION_CHARS = 2000, 10, 200


class AskHuman(Params):
    question: Annotated[
        str,
        msgspec.Meta(
            min_length=1, max_length=MAX_QUESTION_CHARS, description="What to ask the person"
        ),
    ]
    options: Annotated[
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_OPTION_CHARS)]],
        msgspec.Meta(
            max_length=MAX_OPTIONS,
            description="The answers to choose from (up to 10); omitted: any text",
        ),
    ] = []
