"""The Hatchet timer backend: one-off schedules and crons held by a Hatchet engine, fired into
a Hatchet worker task that delivers them to the agent like the built-in worker does.

Hatchet's ticker polls its one-off schedules every 5 s for those due in the next 5 s, so a
schedule due sooner than ``LEAD`` could be seen only after its time: those stay on the fast path,
the built-in worker that every timer service runs next to Hatchet (``holds``). Hatchet may
deliver a fire twice; the agent deduplicates by (schedule id, fire time). A failed delivery is
retried by Hatchet itself up to the task's ``retries``, with exponential backoff (2, 4, 8 s... up
to ``BACKOFF_MAX_S``), so that retries outlast a restart of OwlClaw's database, which is what
fails a delivery.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hatchet_sdk import Context, EmptyModel

from events.cron import canonical_cron, cron_times
from owlclaw.messages import Fire
from owlclaw.timers.fires import GRACE, decide, on_missed_of
from owlclaw.timers.worker import Deliver, RetryPolicy

if TYPE_CHECKING:
    from hatchet_sdk import Hatchet

TASK = "owlclaw-timer-fire"
CRON_FIRE_TIME = "hatchet__cron_scheduled_at"
LEAD = timedelta(seconds=8)
"""A one-off due at least this far ahead is held by Hatchet: the ticker's 5 s look-ahead, with
margin for a poll delayed under load (its polls never overlap: a slow one pushes the next)."""
BACKOFF_FACTOR = 2.0
"""The engine waits BACKOFF_FACTOR ** n seconds before the n-th retry of a failed delivery (2, 4,
8 s with the default 3 retries: the last one 14 s after the first failure)."""
BACKOFF_MAX_S = 60


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
            trigger_at=fire_at,
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


def fire_task(
    hatchet: Hatchet,
    deliver: Deliver,
    retry: RetryPolicy | None = None,
    grace: timedelta = GRACE,
    hand_back: Callable[[Fire], bool] = lambda _: False,
) -> Any:
    """The Hatchet task that receives fires; Hatchet retries it on failure, with backoff.
    A fire of an agent this worker does not serve goes to ``hand_back`` instead (it answers
    whether it took it: ``TimerRegistrations.hand_back``), not to another server's agent."""
    retries = (retry or RetryPolicy()).max_retries

    @hatchet.task(
        name=TASK,
        retries=retries,
        backoff_factor=BACKOFF_FACTOR,
        backoff_max_seconds=BACKOFF_MAX_S,
        input_validator=EmptyModel,
    )
    async def owlclaw_timer_fire(task_input: EmptyModel, ctx: Context) -> dict[str, Any]:
        raw = task_input.model_dump()
        fire = fire_of(raw, dict(ctx.additional_metadata or {}), datetime.now(UTC), grace)
        if await asyncio.to_thread(hand_back, fire):
            return {"key": fire.key, "outcome": "handed back", "run_id": None}
        outcome = await deliver(fire)
        return {"key": fire.key, "outcome": outcome.kind, "run_id": outcome.run_id}

    return owlclaw_timer_fire
