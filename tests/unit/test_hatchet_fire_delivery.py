"""The Hatchet task's delivery: a one-off triggers EARLY before its fire time and waits for it
without holding a delivery slot; deliveries are bounded; a delivery the database refused is
retried by the task itself (the engine may never hear that it failed); the agent is made ready
while its fire waits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from events import LedgerUnavailable
from owlclaw.messages import Fire, FireOutcome
from owlclaw.timers.hatchet_backend import (
    EARLY,
    REFUSED_PAUSES_S,
    FireDelivery,
    served_only,
    until_due,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def once(agent_id: str, due: datetime) -> dict[str, Any]:
    return {"agent_id": agent_id, "schedule_id": f"s-{agent_id}", "fire_time": due.isoformat()}


def cron(agent_id: str) -> dict[str, Any]:
    return {"agent_id": agent_id, "schedule_id": f"s-{agent_id}", "cron": "* * * * *"}


@pytest.mark.parametrize(
    ("task_input", "wait_s"),
    [
        (once("a", NOW + timedelta(seconds=1.5)), 1.5),
        (once("a", NOW + timedelta(seconds=600)), EARLY.total_seconds()),  # a run made by hand
        (once("a", NOW - timedelta(seconds=3)), 0.0),  # the engine was late: at once
        (cron("a"), 0.0),  # a cron triggers at its minute
    ],
)
def test_a_one_off_waits_for_its_fire_time_and_never_more_than_early(
    task_input: dict[str, Any], wait_s: float
) -> None:
    assert until_due(task_input, NOW) == wait_s


class Recorder:
    """A deliver that records its fires, optionally held until ``release`` is set."""

    def __init__(self, failures: list[BaseException] | None = None):
        self.fires: list[Fire] = []
        self.failures = failures or []
        self.release = asyncio.Event()
        self.release.set()
        self.running = 0
        self.most = 0

    async def __call__(self, fire: Fire) -> FireOutcome:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
            if self.failures:
                raise self.failures.pop(0)
            self.fires.append(fire)
            return FireOutcome("fire", run_id=f"run-{fire.agent_id}")
        finally:
            self.running -= 1


def recording_sleep(slept: list[float]) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return sleep


def test_a_fire_is_delivered_for_its_fire_time_after_the_wait() -> None:
    due = datetime.now(UTC) + timedelta(seconds=1)
    deliver, slept = Recorder(), []
    delivery = FireDelivery(deliver, deliveries=4, sleep=recording_sleep(slept))
    result = asyncio.run(delivery(once("a", due), {}))
    assert result["outcome"] == "fire" and result["run_id"] == "run-a"
    [fire] = deliver.fires
    assert (fire.agent_id, fire.fire_time) == ("a", due)
    assert len(slept) == 1 and 0 < slept[0] <= 1


def test_a_waiting_task_holds_no_delivery_slot() -> None:
    async def scenario() -> tuple[Recorder, bool]:
        deliver = Recorder()
        parked = asyncio.Event()

        async def sleep(seconds: float) -> None:
            if seconds:
                parked.set()
                await asyncio.Event().wait()  # the fire time never comes in this test

        delivery = FireDelivery(deliver, deliveries=1, sleep=sleep)
        waiting = asyncio.create_task(
            delivery(once("later", datetime.now(UTC) + timedelta(seconds=2)), {})
        )
        await parked.wait()
        await delivery(cron("now"), {"hatchet__cron_scheduled_at": datetime.now(UTC).isoformat()})
        still_waiting = not waiting.done()
        waiting.cancel()
        return deliver, still_waiting

    deliver, still_waiting = asyncio.run(scenario())
    assert still_waiting
    assert [f.agent_id for f in deliver.fires] == ["now"]


def test_deliveries_are_bounded_while_more_tasks_run() -> None:
    async def scenario() -> Recorder:
        deliver = Recorder()
        deliver.release.clear()
        delivery = FireDelivery(deliver, deliveries=2, sleep=recording_sleep([]))
        tasks = [
            asyncio.create_task(delivery(once(f"a{i}", datetime.now(UTC)), {})) for i in range(6)
        ]
        while deliver.running < 2:
            await asyncio.sleep(0)
        for _ in range(20):  # the others had every chance to start delivering
            await asyncio.sleep(0)
        deliver.release.set()
        await asyncio.gather(*tasks)
        return deliver

    deliver = asyncio.run(scenario())
    assert deliver.most == 2
    assert len(deliver.fires) == 6


class RayTaskError(Exception):
    """An actor's exception as Ray hands it over: the original is its ``cause``."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def test_a_refused_delivery_is_retried_with_pauses_until_the_database_answers() -> None:
    refusals: list[BaseException] = [
        LedgerUnavailable("PostgreSQL is away"),
        RayTaskError(LedgerUnavailable("still away")),
    ]
    deliver, slept = Recorder(refusals), []
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep(slept))
    result = asyncio.run(delivery(once("a", NOW), {}))
    assert result["outcome"] == "fire"
    assert slept == [0.0, *REFUSED_PAUSES_S[:2]]


def test_a_delivery_refused_past_every_pause_fails_the_task() -> None:
    refusals: list[BaseException] = [LedgerUnavailable("away")] * (len(REFUSED_PAUSES_S) + 1)
    deliver, slept = Recorder(refusals), []
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep(slept))
    with pytest.raises(LedgerUnavailable):
        asyncio.run(delivery(once("a", NOW), {}))
    assert slept == [0.0, *REFUSED_PAUSES_S]


def test_any_other_failure_fails_the_task_at_once() -> None:
    deliver, slept = Recorder([RuntimeError("the host is gone")]), []
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep(slept))
    with pytest.raises(RuntimeError, match="host is gone"):
        asyncio.run(delivery(once("a", NOW), {}))
    assert slept == [0.0]


def test_a_fire_of_an_agent_served_elsewhere_is_handed_back() -> None:
    deliver = Recorder()
    delivery = FireDelivery(
        deliver, deliveries=1, hand_back=lambda fire: True, sleep=recording_sleep([])
    )
    result = asyncio.run(delivery(once("a", NOW), {}))
    assert result["outcome"] == "handed back" and deliver.fires == []


class Warmer:
    """A warm that records which agents it made ready and whether their fire had come yet."""

    def __init__(self, deliver: Recorder, failure: BaseException | None = None):
        self.deliver = deliver
        self.failure = failure
        self.warmed: list[tuple[str, int]] = []

    async def __call__(self, agent_id: str) -> None:
        self.warmed.append((agent_id, len(self.deliver.fires)))
        if self.failure is not None:
            raise self.failure


def test_the_agent_is_made_ready_while_its_fire_waits_for_its_time() -> None:
    deliver, slept = Recorder(), []
    warm = Warmer(deliver)
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep(slept), warm=warm)
    result = asyncio.run(delivery(once("a", datetime.now(UTC) + timedelta(seconds=3)), {}))
    assert result["outcome"] == "fire"
    assert warm.warmed == [("a", 0)]  # before its fire was delivered
    assert len(slept) == 1 and slept[0] > 0


def test_a_fire_due_now_or_a_cron_fire_is_delivered_without_a_warm() -> None:
    deliver = Recorder()
    warm = Warmer(deliver)
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep([]), warm=warm)
    asyncio.run(delivery(once("late", datetime.now(UTC) - timedelta(seconds=1)), {}))
    cron_time = {"hatchet__cron_scheduled_at": datetime.now(UTC).isoformat()}
    asyncio.run(delivery(cron("hourly"), cron_time))
    assert warm.warmed == []  # the delivery activates the agent itself
    assert [f.agent_id for f in deliver.fires] == ["late", "hourly"]


def test_a_warm_that_fails_is_logged_and_the_fire_is_delivered_at_its_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deliver = Recorder()
    warm = Warmer(deliver, LedgerUnavailable("PostgreSQL is away"))
    delivery = FireDelivery(deliver, deliveries=1, sleep=recording_sleep([]), warm=warm)
    with caplog.at_level(logging.WARNING, logger="owlclaw.timers.hatchet_backend"):
        result = asyncio.run(delivery(once("a", datetime.now(UTC) + timedelta(seconds=3)), {}))
    assert result["outcome"] == "fire" and [f.agent_id for f in deliver.fires] == ["a"]
    assert "could not make a ready before its fire: PostgreSQL is away" in caplog.text


def test_only_an_agent_served_here_is_activated_before_its_fire() -> None:
    activated: list[str] = []

    async def activate(agent_id: str) -> float:
        activated.append(agent_id)
        return 1.0

    async def warm_each(serves: Callable[[str], bool]) -> None:
        warm = served_only(activate, serves)
        for agent_id in ("mine", "theirs"):
            await warm(agent_id)

    asyncio.run(warm_each({"mine"}.__contains__))
    assert activated == ["mine"]  # another server's agent is its writer's to activate
    asyncio.run(warm_each(lambda _: True))
    assert activated == ["mine", "mine", "theirs"]
