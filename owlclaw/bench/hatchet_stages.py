"""Where a Hatchet fire's lateness goes, from the engine's own timestamps of its task run.

The engine's ticker triggers a one-off's run (``hatchet_backend.EARLY`` before it is due)
through the message queue (task created), then the scheduler and dispatcher hand it to the
worker, which reports it started, waits for the fire time and delivers it to the agent's host,
which commits TimerFired. The slack is how long before the fire time the task was ready: the
engine's latency that the early trigger hid (negative: it started late).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from events import catalog as ev
from owlclaw.bench import percentiles

PAGE = 200


def _task_runs(hatchet: Any, since: datetime, expected: int, timeout_s: float) -> list[Any]:
    """The task runs created since ``since``; the engine lists them a moment after they end."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs: list[Any] = []
        while True:
            page = hatchet.runs.list(
                since=since, only_tasks=True, limit=PAGE, offset=len(runs), include_payloads=False
            )
            runs += page.rows or []
            if len(page.rows or []) < PAGE:
                break
        if len(runs) >= expected or time.monotonic() > deadline:
            return runs
        time.sleep(1)


def stages(hatchet: Any, fired: list[ev.TimerFired], since: datetime) -> dict[str, Any]:
    """Each stage's share of the fires' lateness, the slack before the fire time, the delivery
    from the later of the fire time and the task's start, and when the slowest fires were due
    (seconds after the first fire was due)."""
    by_schedule = {f.schedule_id: f for f in fired}
    runs = _task_runs(hatchet, since, len(fired), timeout_s=30)
    created, started, delivered, slack, ready, late = [], [], [], [], [], []
    for run in runs:
        fire = by_schedule.get(str((run.additional_metadata or {}).get("schedule_id")))
        if fire is None or run.started_at is None:
            continue
        created.append((run.created_at - fire.fire_time).total_seconds() * 1000)
        started.append((run.started_at - run.created_at).total_seconds() * 1000)
        delivered.append((fire.timestamp - run.started_at).total_seconds() * 1000)
        slack.append((fire.fire_time - run.started_at).total_seconds() * 1000)
        ready_at = max(run.started_at, fire.fire_time)
        ready.append((fire.timestamp - ready_at).total_seconds() * 1000)
        late.append((fire.timestamp - fire.fire_time, fire.fire_time))
    first = min((due for _, due in late), default=None)
    return {
        "fires_matched": len(created),
        "due_to_task_created": percentiles(created),
        "created_to_started_on_worker": percentiles(started),
        "started_to_timer_fired": percentiles(delivered),
        "slack_before_due": percentiles(slack),
        "due_or_started_to_timer_fired": percentiles(ready),
        "slowest_5_due_at_s": [
            round((due - first).total_seconds(), 2) for _, due in sorted(late, reverse=True)[:5]
        ]
        if first is not None
        else [],
    }
