"""Timer deliveries: which fire times are due, and the misfire policy.

A delivery is a ``Fire`` message to the agent (``owlclaw.messages``), answered with its
``FireOutcome``; it carries its idempotency key (schedule id, scheduled fire time). The verdict
(``Agent.receive_fire``) is taken against the agent's state by the agent's own writer and
committed with expected version, so two deliveries of the same fire can never both start a run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

GRACE = timedelta(seconds=30)
"""A delivery later than this after its fire time counts as missed (the service was down)."""


def plan(
    due: list[datetime],
    now: datetime,
    policy: str,
    window: timedelta,
    grace: timedelta = GRACE,
) -> list[tuple[datetime, str | None]]:
    """Apply a misfire policy to fire times that are due: (time, None) fires, (time, reason)
    is recorded as missed. On time (within ``grace``) always fires; nothing is dropped silently.
    """
    late = [t for t in due if now - t > grace]
    on_time: list[tuple[datetime, str | None]] = [(t, None) for t in due if now - t <= grace]
    if not late:
        return on_time
    inside = [t for t in late if now - t <= window]
    decided: list[tuple[datetime, str | None]] = []
    for t in late:
        if policy == "skip":
            decided.append((t, "skipped: the timer service was down at fire time"))
        elif t not in inside:
            decided.append((t, f"beyond the catch-up window of {window.total_seconds():g} s"))
        elif policy == "coalesce" and (on_time or t != inside[-1]):
            latest = on_time[-1][0] if on_time else inside[-1]
            decided.append((t, f"coalesced into the fire at {latest.isoformat()}"))
        else:
            decided.append((t, None))
    return decided + on_time
