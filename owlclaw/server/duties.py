"""The service's recurring duties, each a supervised worker that runs until told to stop:
holding the serving locks, expiring overdue approvals, watching sub-agents, heartbeats,
archiving old runs.

Its own module because these run beside the service, not as part of its start or stop: each
is handed what it needs, and the supervisor restarts one that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from events import Ledger
from events.streams import now
from owlclaw.agents import Agents
from owlclaw.heartbeat.checks import SourceChecks
from owlclaw.heartbeat.config import HeartbeatSources
from owlclaw.heartbeat.wake import SourceResult, failures, wake_payload
from owlclaw.messages import ExpireApprovals, Message, Submit
from owlclaw.runtime.approvals import overdue
from owlclaw.server.serving_locks import ServingLocks
from owlclaw.tools.subagents import watch_subagents
from projections import VIEWS, MemoryView
from projections.absorbed import absorbed
from projections.memory_ages import AgePolicy, apply_age_policy

log = logging.getLogger(__name__)

EXPIRY_CHECK_S = 5.0
"""How often served agents' pending approvals are checked for their expiry."""
LOCK_CHECK_S = 5.0
"""How often the serving locks' connection is checked (and the locks taken again)."""
ARCHIVE_EVERY_S = 86_400.0
"""How often ``[ledger] archive_after_days`` is applied: daily, first at start."""
MEMORY_AGES_EVERY_S = 3600.0
"""How often the memory age policy (``[memory] archive_after_days``, ``delete_after_days``)
is applied: hourly, first at start."""


async def hold_locks(locks: ServingLocks, stop: asyncio.Event) -> None:
    """Every ``LOCK_CHECK_S``, check the locks' connection, taking them again after a
    database restart (one that another server took meanwhile fails this worker, which
    ``owlclaw status`` shows)."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), LOCK_CHECK_S)
            return
        await asyncio.to_thread(locks.check)


async def heartbeat(
    ask: Callable[[Message[Any]], Awaitable[Any]],
    agent_id: str,
    every_s: float,
    stop: asyncio.Event,
    sources: HeartbeatSources | None = None,
    seen: Callable[[list[SourceResult]], None] = lambda _: None,
) -> None:
    """Queue a heartbeat run every ``every_s`` until stopped (a failure to queue one is
    raised: the supervisor reports it and starts the beat again). With ``sources``, each beat
    checks them first: the run's payload names those that found something (so it wakes) and
    those that failed (logged, and recorded on the run even when it is skipped); ``seen`` is
    told each beat's answers (``owlclaw status`` shows the last)."""
    checks = SourceChecks(sources) if sources else None
    try:
        if checks is not None:
            await checks.start()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
                return
            found = await checks.check() if checks is not None else []
            seen(found)
            payload = wake_payload(found)
            if failed := failures(payload):
                log.warning("heartbeat of %s: %s", agent_id, failed)
            await ask(Submit(agent_id=agent_id, trigger="heartbeat", payload=payload or None))
    finally:
        if checks is not None:
            await checks.close()


async def approval_expiry(
    ledger: Ledger, agents: Agents, served: Sequence[str], stop: asyncio.Event
) -> None:
    """Every ``EXPIRY_CHECK_S``, expire the served agents' overdue approvals (read from the
    ledger, so an agent that is not active is activated for it)."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), EXPIRY_CHECK_S)
            return
        for agent_id in await asyncio.to_thread(overdue, ledger, list(served)):
            await agents.ask(ExpireApprovals(agent_id=agent_id))


async def subagent_watch(
    ledger: Ledger, agents: Agents, served: Sequence[str], stop: asyncio.Event
) -> None:
    """Every ``EXPIRY_CHECK_S``, bring back sub-agent runs a dead host left behind and
    re-send reports that never reached their parent (``watch_subagents``)."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), EXPIRY_CHECK_S)
            return
        await watch_subagents(ledger, agents, list(served))


async def archive_retention(
    ledger: Ledger,
    served: Sequence[str],
    before: Callable[[], datetime],
    stop: asyncio.Event,
    every_s: float = ARCHIVE_EVERY_S,
) -> None:
    """At start and then every ``every_s``, archive the served agents' runs that ended before
    ``before()`` (``[ledger] archive_after_days`` ago) and that every view has absorbed, as
    ``owlclaw archive`` does; a failure is raised, so the supervisor reports it and tries
    again."""
    while True:
        moment = before()
        caught = await asyncio.to_thread(absorbed, ledger, VIEWS)
        for agent_id in served:
            done = await asyncio.to_thread(
                ledger.archive.archive_agent, agent_id, moment, caught.position
            )
            if done.held:
                log.info(
                    "archive-retention: %d run(s) of %s held back until the %s view absorbs "
                    "them (it is at log position %d)",
                    done.held,
                    agent_id,
                    caught.view,
                    caught.position,
                )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
            return


async def memory_ages(
    view: MemoryView,
    policy: AgePolicy,
    served: Sequence[str],
    stop: asyncio.Event,
    clock: Callable[[], datetime] = now,
    every_s: float = MEMORY_AGES_EVERY_S,
) -> None:
    """At start and then every ``every_s``, archive and delete the served agents' memories
    the age policy says are due (``projections.memory_ages``); a failure is raised, so the
    supervisor reports it and tries again."""
    while True:
        applied = await asyncio.to_thread(apply_age_policy, view, policy, clock(), served)
        for done in applied:
            log.info(
                "memory ages: %s: %d memory(ies) archived, %d deleted",
                done.agent_id,
                len(done.archived),
                len(done.deleted),
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
            return
