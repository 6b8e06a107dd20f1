"""Timer deliveries: which fire times are due, and what a schedule's ``on_missed`` policy makes
of the fires the timer service missed.

A delivery is a ``Fire`` message to the agent (``owlclaw.messages``), answered with its
``FireOutcome``; it carries its idempotency key (schedule id, scheduled fire time). The verdict
(``Agent.receive_fire``) is taken against the agent's state by the agent's own writer and
committed with expected version, so two deliveries of the same fire can never both start a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import get_args

from events.catalog import ON_MISSED_OF_MISFIRE, OnMissed

GRACE = timedelta(seconds=30)
"""A delivery later than this after its fire time counts as missed (the service was down)."""
MAX_CAUGHT_UP = 100
"""Under ``on_missed = "all"`` at most this many missed fires of a schedule fire after a
downtime (the latest ones); the older ones are recorded as missed."""
SKIPPED = "skipped (on_missed = skip): the timer service was down at fire time"


@dataclass(frozen=True)
class Planned:
    """One delivery: a fire (``missed`` None), or one record of ``occurrences`` missed fires
    from ``first`` (None: only ``fire_time``) to ``fire_time``, all missed for ``missed``."""

    fire_time: datetime
    missed: str | None = None
    occurrences: int = 1
    first: datetime | None = None


def on_missed_of(stored: str) -> OnMissed:
    """A stored policy (a timer row's, a Hatchet task's input), the names from before
    ScheduleRequested v2 included; an unknown name is refused, not guessed."""
    if stored in get_args(OnMissed):
        return stored  # type: ignore[return-value]
    if stored in ON_MISSED_OF_MISFIRE:
        return ON_MISSED_OF_MISFIRE[stored]
    raise ValueError(f"unknown on_missed policy {stored!r}: one of one, all, skip")


def decide(
    due: list[datetime],
    now: datetime,
    policy: OnMissed,
    window: timedelta,
    grace: timedelta = GRACE,
) -> list[tuple[datetime, str | None]]:
    """Each due fire time, in order, with None (it fires) or why it is recorded as missed. A fire
    on time (within ``grace``) always fires; one later than ``window`` never does; of the late
    ones inside it, "one" fires the latest unless a fire on time stands for them, "all" the
    latest ``MAX_CAUGHT_UP``, "skip" none. A time's verdict depends only on it and the later
    times, so a backend that delivers each time alone (Hatchet) decides as the built-in does."""
    due = sorted(due)
    on_time = [t for t in due if now - t <= grace]
    late = [t for t in due if now - t > grace]
    inside = [t for t in late if now - t <= window]
    if policy == "one":
        caught = set() if on_time else set(inside[-1:])
    elif policy == "all":
        caught = set(inside[-MAX_CAUGHT_UP:])
    else:
        caught = set()
    decided: list[tuple[datetime, str | None]] = []
    for t in late:
        if t in caught:
            decided.append((t, None))
        elif policy == "skip":
            decided.append((t, SKIPPED))
        elif t not in inside:
            decided.append((t, f"beyond the catch-up window of {window.total_seconds():g} s"))
        elif policy == "one":
            decided.append((t, f"coalesced into the fire at {(on_time or inside)[-1].isoformat()}"))
        else:
            decided.append(
                (t, f"more than {MAX_CAUGHT_UP} missed: on_missed = all fires the latest")
            )
    return decided + [(t, None) for t in on_time]


def plan(
    due: list[datetime],
    now: datetime,
    policy: OnMissed,
    window: timedelta,
    grace: timedelta = GRACE,
) -> list[Planned]:
    """The deliveries for ``decide``'s verdicts, in order: each fire, and one record for each
    run of consecutive misses with the same reason (a long downtime is a few records, not one
    per occurrence). Every due time is in exactly one of them."""
    planned: list[Planned] = []
    for t, missed in decide(due, now, policy, window, grace):
        last = planned[-1] if planned else None
        if missed is not None and last is not None and last.missed == missed:
            planned[-1] = Planned(t, missed, last.occurrences + 1, last.first or last.fire_time)
        else:
            planned.append(Planned(t, missed))
    return planned
