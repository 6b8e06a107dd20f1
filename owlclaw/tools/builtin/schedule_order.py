"""The order in which schedules are shown: list_schedules and the prompt's schedules section."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from events.agent_state import ActiveSchedule
from events.cron import next_fire_if_any


def schedule_next_fire(schedule: ActiveSchedule, at: datetime) -> datetime | None:
    """A once schedule's fire time, or a cron schedule's first fire after ``at`` (None when its
    expression no longer fires)."""
    return schedule.fire_at if schedule.cron is None else next_fire_if_any(schedule.cron, at)


def soonest_first(
    schedules: Mapping[str, ActiveSchedule], at: datetime
) -> list[tuple[str, ActiveSchedule, datetime | None]]:
    """Each schedule with its next fire, soonest first (never-firing last), then by id: the
    order list_schedules and the prompt section share."""
    fires = {i: schedule_next_fire(s, at) for i, s in schedules.items()}
    order = sorted(schedules, key=lambda i: (fires[i] is None, fires[i] or at, i))
    return [(i, schedules[i], fires[i]) for i in order]
