"""The Hatchet timer backend: one-off schedules and crons held by a Hatchet engine, fired into
a Hatchet worker task that delivers them to the agent like the built-in worker does.

Hatchet's ticker polls its one-off schedules every 5 s for those due in the next 5 s, so a
schedule due sooner than ``LEAD`` could be seen only after its time: those stay on the fast path,
the built-in worker that every timer service runs next to Hatchet (``holds``). Hatchet may
deliver a fire twice; the agent deduplicates by (schedule id, fire time). A failed delivery is
retried by Hatchet itself up to the task's ``retries``, with exponential backoff (2, 4, 8 s... up
to ``BACKOFF_MAX_S``), so that retries outlast a restart of OwlClaw's database, which is what
fails a delivery.

The engine's own path from a schedule's trigger time to a started task (its ticker, ~15-20
sequential transactions, three hops through its PostgreSQL message queue polled every second,
each message a COPY and a ``pg_notify`` that takes PostgreSQL's global notify lock; worker slots
refreshed every 1-1.5 s; none of it settable) slows down most when it competes for CPU with the
deliveries of earlier fires (``EARLY`` says how far). So a one-off is registered to trigger
``EARLY`` before its fire time: the engine's latency is spent before the fire, and the task waits
out the rest (``FireDelivery``). A cancel in those last seconds is still honoured: the agent
records a fire of an ended schedule as TimerDeduplicated. While it waits, the task makes the agent
ready (``warm``): a fire to an agent passivated since its last run would otherwise pay for the
activation after its fire time (~250 ms at p50 when 20 agents activate at once on a busy
machine). Crons trigger at their minute, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hatchet_sdk import Context, EmptyModel

from events import LedgerUnavailable
from events.cron import canonical_cron, cron_times
from owlclaw.messages import Fire, FireOutcome
from owlclaw.timers.fires import GRACE, decide, on_missed_of
from owlclaw.timers.worker import Deliver, RetryPolicy

if TYPE_CHECKING:
    from hatchet_sdk import Hatchet

log = logging.getLogger(__name__)
TASK = "owlclaw-timer-fire"
CRON_FIRE_TIME = "hatchet__cron_scheduled_at"
EARLY = timedelta(seconds=8)
"""A one-off triggers this long before its fire time; its task waits until the fire time. 2 s
hid the engine's latency on a quiet machine, not with a core kept busy (trigger to started ~6 s
at p99 in a 200-fire burst, ``owlclaw bench timers --background-load 1``)."""
LEAD = timedelta(seconds=10)
"""A one-off due at least this far ahead is held by Hatchet. Its ticker polls every 5 s for
triggers due in the next 5 s or already past, and runs a past one at once; so a one-off due
``LEAD`` ahead starts its path through the engine within ~5 s (more when a poll is delayed under
load: they never overlap), which leaves the engine ~5 s before the fire, and one due further ahead
the whole ``EARLY``."""
ENGINE_SLOTS = 400
"""Tasks the worker takes from the engine at once: tasks waiting for their fire time hold a slot
each (20 fires a second hold 160), so deliveries are bounded apart (``timers.hatchet_slots``), not
by the engine's slots."""
REFUSED_PAUSES_S = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Pauses between deliveries refused because OwlClaw's PostgreSQL is away (LedgerUnavailable):
the task retries itself, since the engine, often on the same PostgreSQL, may never hear that it
failed and so never retry it."""
BACKOFF_FACTOR = 2.0
"""The engine waits BACKOFF_FACTOR ** n seconds before the n-th retry of a failed delivery (2, 4,
8 s with the default 3 retries: the last one 14 s after the first failure)."""
BACKOFF_MAX_S = 60
EXECUTION_TIMEOUT = timedelta(minutes=2)
"""A task's longest run: the wait for its fire time and deliveries refused meanwhile (~40 s)."""


class HatchetBackend:
    name = "hatchet"

    def __init__(self, hatchet: Hatchet, lead: timedelta = LEAD):
        self.hatchet = hatchet
        self.lead = lead

    def holds(self, row: dict[str, Any], now: datetime) -> bool:
        """Crons (the ticker loads a new cron at once) and one-offs due ``lead`` or later."""
        return bool(row["kind"] == "cron" or row["next_fire_at"] - now >= self.lead)

    def register(self, row: dict[str, Any]) -> str:
        fire_input = {
            "agent_id": row["agent_id"],
            "schedule_id": row["schedule_id"],
            "on_missed": on_missed_of(row["misfire"]),
            "catch_up_window_s": row["catch_up_window_s"],
            "cron": row["cron"],
        }
        metadata = {"schedule_id": row["schedule_id"], "agent_id": row["agent_id"]}
        if row["kind"] == "cron":
            cron = self.hatchet.cron.create(
                workflow_name=TASK,
                cron_name=row["schedule_id"],
                expression=canonical_cron(row["cron"]),
                input=fire_input,
                additional_metadata=metadata,
            )
            return str(cron.metadata.id)
        fire_at: datetime = row["next_fire_at"]
        scheduled = self.hatchet.scheduled.create(
            workflow_name=TASK,
            trigger_at=fire_at - EARLY,
            input={**fire_input, "fire_time": fire_at.isoformat()},
            additional_metadata=metadata,
        )
        return str(scheduled.metadata.id)

    def cancel(self, backend_id: str, kind: str) -> None:
        if kind == "cron":
            self.hatchet.cron.delete(backend_id)
        else:
            self.hatchet.scheduled.delete(backend_id)


def fire_of(
    task_input: dict[str, Any], metadata: dict[str, Any], now: datetime, grace: timedelta = GRACE
) -> Fire:
    """The fire a Hatchet task run stands for, with the schedule's on_missed policy applied to
    its lateness: Hatchet delivers each of a cron's missed fires alone, so the later fires that
    are due too (Hatchet delivers them as well) are what decides, as in the built-in worker. A
    task registered before its input named the cron (or the policy, then ``misfire``) is
    decided alone."""
    stamp = task_input.get("fire_time") or metadata.get(CRON_FIRE_TIME)
    fire_time = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else now
    window = timedelta(seconds=int(task_input.get("catch_up_window_s", 3600)))
    policy = on_missed_of(str(task_input.get("on_missed") or task_input.get("misfire") or "one"))
    cron = task_input.get("cron")
    later = cron_times(str(cron), fire_time, now) if cron else []
    missed = dict(decide([fire_time, *later], now, policy, window, grace))[fire_time]
    return Fire(
        agent_id=str(task_input["agent_id"]),
        schedule_id=str(task_input["schedule_id"]),
        fire_time=fire_time,
        missed=missed,
    )


def until_due(task_input: dict[str, Any], now: datetime) -> float:
    """Seconds a one-off's task waits for its fire time: ``EARLY`` at most, so a run made by
    hand for a later fire is delivered as before; none for a cron (it triggers on time)."""
    stamp = task_input.get("fire_time")
    if not stamp:
        return 0.0
    ahead = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) - now
    return max(0.0, min(ahead, EARLY).total_seconds())


def refused(error: BaseException) -> bool:
    """The agent's writer could not reach the database (raised here, or through a Ray actor)."""
    return isinstance(error, LedgerUnavailable) or isinstance(
        getattr(error, "cause", None), LedgerUnavailable
    )


Warm = Callable[[str], Awaitable[object]]
"""Make an agent ready to receive a fire (activate it)."""


def served_only(activate: Warm, serves: Callable[[str], bool]) -> Warm:
    """Activate only an agent served here (``TimerRegistrations.serves``): another server's is
    its own writer's to activate."""

    async def warm(agent_id: str) -> object:
        if not serves(agent_id):
            return None
        return await activate(agent_id)

    return warm


class FireDelivery:
    """What the task does with a fire: wait for its time (not holding a delivery) while the
    agent is made ready (``warm``), then deliver it, ``deliveries`` at most at once, retrying a
    delivery the database refused."""

    def __init__(
        self,
        deliver: Deliver,
        deliveries: int,
        grace: timedelta = GRACE,
        hand_back: Callable[[Fire], bool] = lambda _: False,
        pauses_s: tuple[float, ...] = REFUSED_PAUSES_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        warm: Warm | None = None,
    ):
        self.deliver = deliver
        self.warm = warm
        self.deliveries = asyncio.Semaphore(deliveries)
        self.grace = grace
        self.hand_back = hand_back
        self.pauses_s = pauses_s
        self.sleep = sleep

    async def __call__(
        self, task_input: dict[str, Any], metadata: dict[str, Any]
    ) -> dict[str, Any]:
        wait = until_due(task_input, datetime.now(UTC))
        if wait and self.warm is not None:
            await asyncio.gather(self.sleep(wait), self._warm(self.warm, task_input))
        else:
            await self.sleep(wait)
        async with self.deliveries:
            fire = fire_of(task_input, metadata, datetime.now(UTC), self.grace)
            if await asyncio.to_thread(self.hand_back, fire):
                return {"key": fire.key, "outcome": "handed back", "run_id": None}
            outcome = await self._deliver(fire)
        return {"key": fire.key, "outcome": outcome.kind, "run_id": outcome.run_id}

    @staticmethod
    async def _warm(warm: Warm, task_input: dict[str, Any]) -> None:
        """A failure here is the delivery's to meet: it is logged, and the fire goes on."""
        agent_id = str(task_input["agent_id"])
        try:
            await warm(agent_id)
        except Exception as error:
            log.warning("could not make %s ready before its fire: %s", agent_id, error)

    async def _deliver(self, fire: Fire) -> FireOutcome:
        for pause in self.pauses_s:
            try:
                return await self.deliver(fire)
            except Exception as error:
                if not refused(error):
                    raise
                log.warning("delivery of %s refused, again in %g s: %s", fire.key, pause, error)
            await self.sleep(pause)
        return await self.deliver(fire)


def fire_task(
    hatchet: Hatchet,
    deliver: Deliver,
    retry: RetryPolicy | None = None,
    grace: timedelta = GRACE,
    hand_back: Callable[[Fire], bool] = lambda _: False,
    deliveries: int = 32,
    warm: Warm | None = None,
) -> Any:
    """The Hatchet task that receives fires (``FireDelivery``); Hatchet retries it on failure,
    with backoff. A fire of an agent this worker does not serve goes to ``hand_back`` instead (it
    answers whether it took it: ``TimerRegistrations.hand_back``), not to another server's agent."""
    retries = (retry or RetryPolicy()).max_retries
    delivery = FireDelivery(deliver, deliveries, grace, hand_back, warm=warm)

    @hatchet.task(
        name=TASK,
        retries=retries,
        backoff_factor=BACKOFF_FACTOR,
        backoff_max_seconds=BACKOFF_MAX_S,
        execution_timeout=EXECUTION_TIMEOUT,
        input_validator=EmptyModel,
    )
    async def owlclaw_timer_fire(task_input: EmptyModel, ctx: Context) -> dict[str, Any]:
        return await delivery(task_input.model_dump(), dict(ctx.additional_metadata or {}))

    return owlclaw_timer_fire
