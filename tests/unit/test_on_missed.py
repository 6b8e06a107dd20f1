"""A schedule's on_missed policy over an injected clock: every fire that came due while no
timer worker ran is either fired or recorded as missed, as the policy says ("one" fires once,
"all" each up to the cap, "skip" none); nothing is dropped or invented, and a backend that
delivers each fire alone (Hatchet) decides as the built-in worker does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog as ev
from events.agent import Agent
from events.codec import MsgspecMapper, stored_topics
from events.cron import cron_times, next_fire
from events.streams import agent_stream_id
from owlclaw.timers.fires import GRACE, MAX_CAUGHT_UP, SKIPPED, decide, on_missed_of, plan
from owlclaw.timers.hatchet_backend import fire_of
from owlclaw.tools.builtin.handlers import BUILTINS

CRONS = ["* * * * *", "*/5 * * * *", "0 * * * *", "15,45 9-17 * * 1-5", "0 9 * * *"]
START = datetime(2026, 6, 1, 0, 0, 30, tzinfo=UTC)


def due_after(cron: str, downtime: timedelta) -> tuple[list[datetime], datetime]:
    """The fire times due when the worker comes back ``downtime`` after the first of them."""
    first = next_fire(cron, START)
    now = first + downtime
    return [first, *cron_times(cron, first, now)], now


@settings(max_examples=300, deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    downtime_s=st.integers(0, 600 * 60),
    policy=st.sampled_from(["one", "all", "skip"]),
    window_s=st.integers(0, 400 * 60),
)
def test_each_policy_fires_what_it_says_and_records_every_other_occurrence(
    cron: str, downtime_s: int, policy: ev.OnMissed, window_s: int
) -> None:
    due, now = due_after(cron, timedelta(seconds=downtime_s))
    window = timedelta(seconds=window_s)
    planned = plan(due, now, policy, window)
    covered = [t for p in planned for t in due if (p.first or p.fire_time) <= t <= p.fire_time]
    assert covered == due  # every occurrence in exactly one delivery, in order
    assert sum(p.occurrences for p in planned) == len(due)
    fired = [p.fire_time for p in planned if p.missed is None]
    assert all(p.occurrences == 1 and p.first is None for p in planned if p.missed is None)
    on_time = [t for t in due if now - t <= GRACE]
    caught_up = [t for t in due if GRACE < now - t <= window]
    expected = {
        "all": caught_up[-MAX_CAUGHT_UP:],
        "one": caught_up[-1:] if not on_time else [],
        "skip": [],
    }[policy]
    assert fired == expected + on_time
    assert all(p.missed for p in planned if p.missed is not None)


@settings(max_examples=200, deadline=None)
@given(
    cron=st.sampled_from(CRONS),
    downtime_s=st.integers(0, 600 * 60),
    policy=st.sampled_from(["one", "all", "skip"]),
    window_s=st.integers(0, 400 * 60),
)
def test_hatchet_deciding_each_fire_alone_agrees_with_the_builtin_worker(
    cron: str, downtime_s: int, policy: ev.OnMissed, window_s: int
) -> None:
    due, now = due_after(cron, timedelta(seconds=downtime_s))
    together = dict(decide(due, now, policy, timedelta(seconds=window_s)))
    task = {
        "agent_id": "a",
        "schedule_id": "s",
        "on_missed": policy,
        "catch_up_window_s": window_s,
        "cron": cron,
    }
    for t in due:
        alone = fire_of(task, {"hatchet__cron_scheduled_at": t.isoformat()}, now)
        assert alone.missed == together[t]


def test_a_long_downtime_is_a_few_records_not_one_per_occurrence() -> None:
    due, now = due_after("* * * * *", timedelta(hours=5))  # 301 fires, the window is 1 h
    planned = plan(due, now, "all", timedelta(hours=1))
    missed = [p for p in planned if p.missed is not None]
    assert [(p.occurrences, p.missed) for p in missed] == [
        (240, "beyond the catch-up window of 3600 s")
    ]
    assert len(planned) == 1 + 60 + 1  # the late hour inside the window fires, and the one now
    skipped = plan(due, now, "skip", timedelta(hours=1))
    assert [(p.first, p.fire_time, p.occurrences, p.missed) for p in skipped] == [
        (due[0], due[-2], 300, SKIPPED),
        (None, due[-1], 1, None),  # the fire due now is on time
    ]


def test_all_fires_at_most_the_latest_hundred() -> None:
    due, now = due_after("* * * * *", timedelta(hours=3))
    planned = plan(due, now, "all", timedelta(hours=4))
    [older, *fires] = planned
    assert older.missed is not None and "more than 100 missed" in older.missed
    assert older.occurrences == len(due) - MAX_CAUGHT_UP - 1
    assert [p.fire_time for p in fires] == due[-MAX_CAUGHT_UP - 1 :]  # and the fire on time


def test_stored_policies_are_read_by_their_names_old_and_new_and_unknown_ones_refused() -> None:
    assert [on_missed_of(n) for n in ("one", "all", "skip")] == ["one", "all", "skip"]
    assert [on_missed_of(n) for n in ("coalesce", "catch_up")] == ["one", "all"]
    with pytest.raises(ValueError, match="unknown on_missed policy 'every'"):
        on_missed_of("every")


@pytest.mark.parametrize(
    ("misfire", "on_missed"),
    [("coalesce", "one"), ("catch_up", "all"), ("skip", "skip"), (None, "one")],
)
def test_a_schedule_recorded_as_v1_reads_with_its_policy_renamed(
    misfire: str | None, on_missed: str
) -> None:
    stream = agent_stream_id("old")
    state = {
        "originator_id": str(stream),
        "originator_version": 2,
        "timestamp": "2026-01-01T00:00:00Z",
        "schedule_id": "s",
        "kind": "cron",
        "focus": "f",
        "cron": "0 9 * * *",
        **({"misfire": misfire} if misfire else {}),
    }
    stored = StoredEvent(stream, 2, "ScheduleRequested", msgspec.json.encode(state))
    event = MsgspecMapper().to_domain_event(stored)
    assert isinstance(event, ev.ScheduleRequested) and event.on_missed == on_missed


def test_missed_fires_are_recorded_with_how_many_and_from_when() -> None:
    agent = Agent.blank(agent_stream_id("m"))
    agent.record(ev.AgentRegistered, agent_id="m")
    agent.record(
        ev.ScheduleRequested,
        schedule_id="s",
        kind="cron",
        focus="f",
        cron="* * * * *",
        on_missed="skip",
    )
    assert agent.state.schedules["s"].on_missed == "skip"
    first, last = START, START + timedelta(minutes=9)
    assert agent.receive_fire("s", last, SKIPPED, 10, first) == ("missed", SKIPPED, None)
    missed = agent.pending_events[-1]
    assert isinstance(missed, ev.TimerMissed)
    assert (missed.occurrences, missed.first_fire_time, missed.fire_time) == (10, first, last)
    assert agent.state.run_count == 0


def test_a_view_reading_schedules_asks_for_every_topic_they_were_stored_under() -> None:
    """Views filter the log by topic in the database: ScheduleRequested v1 events (``misfire``)
    must still reach the schedules view and the timer registrations."""
    assert stored_topics(ev.ScheduleRequested) == ["ScheduleRequested", "ScheduleRequested@2"]
    assert stored_topics(ev.TimerMissed) == ["TimerMissed"]


def test_the_recorded_arguments_name_on_missed_only_when_it_was_given() -> None:
    default = BUILTINS["schedule_once"].spec.parse({"delay_seconds": 60, "focus": "x"})
    chosen = BUILTINS["schedule_cron"].spec.parse(
        {"cron_expression": "0 9 * * *", "focus": "x", "on_missed": "skip"}
    )
    assert msgspec.to_builtins(default) == {"delay_seconds": 60, "focus": "x"}
    assert msgspec.to_builtins(chosen)["on_missed"] == "skip"
