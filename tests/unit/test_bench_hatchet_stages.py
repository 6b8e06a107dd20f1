"""The split of Hatchet fire lateness into stages, from task runs as the engine lists them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from events import catalog as ev
from owlclaw.bench.hatchet_stages import stages

DUE = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def fired(schedule_id: str, due_s: float, late_ms: float) -> ev.TimerFired:
    fire_time = DUE + timedelta(seconds=due_s)
    return ev.TimerFired(
        originator_id=uuid.uuid4(),
        originator_version=1,
        timestamp=fire_time + timedelta(milliseconds=late_ms),
        schedule_id=schedule_id,
        fire_time=fire_time,
    )


def run(schedule_id: str, due_s: float, created_ms: float, started_ms: float) -> Any:
    created = DUE + timedelta(seconds=due_s, milliseconds=created_ms)
    return SimpleNamespace(
        additional_metadata={"schedule_id": schedule_id},
        created_at=created,
        started_at=created + timedelta(milliseconds=started_ms),
    )


class Engine:
    """The engine's run listing, served in pages as hatchet.runs.list serves them."""

    def __init__(self, rows: list[Any]):
        self.rows = rows
        self.runs = self

    def list(self, *, offset: int, limit: int, **_: Any) -> Any:
        return SimpleNamespace(rows=self.rows[offset : offset + limit])


def test_each_fires_lateness_splits_into_trigger_dispatch_and_delivery() -> None:
    fires = [fired(f"s{i}", i * 0.05, 30 + (200 if i == 3 else 0)) for i in range(250)]
    runs = [run(f"s{i}", i * 0.05, 5, 20 + (200 if i == 3 else 0)) for i in range(250)]
    runs.append(run("another-schedule", 0, 1, 1))  # not one of the measured fires
    split = stages(Engine(runs), fires, DUE)
    assert split["fires_matched"] == 250  # over two pages of the listing
    assert split["due_to_task_created"]["p50_ms"] == 5
    assert split["created_to_started_on_worker"]["p50_ms"] == 20
    assert split["started_to_timer_fired"]["p50_ms"] == 5
    assert split["slowest_5_due_at_s"][0] == 0.15  # the fire due 0.15 s after the first


def test_a_run_the_worker_has_not_started_is_left_out() -> None:
    runs = [
        run("s0", 0, 5, 20),
        SimpleNamespace(**{**vars(run("s1", 1, 5, 20)), "started_at": None}),
    ]
    split = stages(Engine(runs), [fired("s0", 0, 30), fired("s1", 1, 30)], DUE)
    assert split["fires_matched"] == 1


def test_a_task_started_before_the_fire_time_reports_its_slack() -> None:
    """Triggered early, the task waits for the fire time: its slack is how long it was ready
    before, and the delivery is timed from the fire time, not from its start."""
    fires = [fired("early", 0, 30), fired("late", 1, 500)]
    runs = [run("early", 0, -2000, 400), run("late", 1, -2000, 2300)]
    split = stages(Engine(runs), fires, DUE)
    assert split["due_to_task_created"]["p50_ms"] == -2000
    # ready 1.6 s before its fire, and 0.3 s after (the median of two is their mean)
    assert split["slack_before_due"]["p99_ms"] == 1600
    assert split["slack_before_due"]["p50_ms"] == (1600 - 300) / 2
    assert split["due_or_started_to_timer_fired"]["p99_ms"] == 200  # 500 late, started 300 late
    assert split["started_to_timer_fired"]["p99_ms"] == 1630  # includes the wait
