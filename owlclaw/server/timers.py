"""The timer service processes: ``owlclaw timers serve`` (registration + built-in worker) and
``owlclaw timers hatchet-worker`` (the Hatchet task that receives fires).

Fires go to the agents' one writer through the ``Agents`` interface: the Ray actors when
``runtime.placement`` is ``dedicated`` or ``shared``; with ``local`` placement, agents hosted in
this process — or, for the Hatchet worker that ``owlclaw run`` starts, the server that hosts
them (``via_server``), so no second process ever writes an agent a host owns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from events import Ledger
from owlclaw.compose.write import place_agents, start_hosts, start_timers, timer_backend
from owlclaw.config import OwlClawConfig
from owlclaw.messages import Activate, Fire, FireOutcome
from owlclaw.supervisor import Supervisor
from owlclaw.timers.hatchet_backend import (
    ENGINE_SLOTS,
    HatchetBackend,
    Warm,
    fire_task,
    served_only,
)
from owlclaw.timers.registrations import TimerRegistrations
from owlclaw.timers.worker import Deliver, RetryPolicy

log = logging.getLogger(__name__)


def serve(ledger: Ledger, config: OwlClawConfig) -> None:
    """Register schedules from the log and fire built-in timers until SIGINT/SIGTERM."""

    async def main() -> None:
        agents = place_agents(ledger, config, owner=False)
        worker, runner = start_timers(ledger, config, timer_backend(config), agents.ask)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        supervisor = Supervisor()
        supervisor.start_thread(f"projection:{runner.view.name}", runner.serve)
        supervisor.start("timer-worker", worker.run)
        try:
            await stop.wait()
        finally:
            await supervisor.stop()
            await agents.close()

    asyncio.run(main())


def hatchet_worker(
    ledger: Ledger,
    config: OwlClawConfig,
    *,
    via_server: bool = False,
    served: Collection[str] | None = None,
) -> None:
    """Run the Hatchet worker that delivers fires (blocks; Hatchet handles signals) to the
    ``served`` agents (None: every agent); it hands the others' fires back (``hand_back``).

    A delivery holds one of ``timers.hatchet_slots`` until the agent's verdict (TimerFired) is
    committed, never for the run, which goes on in the agent's mailbox. With ``shared``
    placement the host actors are started before the worker takes its first task, so no
    delivery waits for a host to start while fires queue behind it for a slot."""
    from hatchet_sdk import Hatchet

    hatchet = Hatchet()
    if via_server:
        deliver, activate = _via_server(config)
    else:
        agents = place_agents(ledger, config, owner=False)
        asyncio.run(start_hosts(agents, config))
        deliver = agents.ask

        async def activate(agent_id: str) -> float:
            return await agents.ask(Activate(agent_id=agent_id))

    retry = RetryPolicy(max_retries=config.timers.max_retries)
    grace = timedelta(seconds=config.timers.misfire_grace_s)
    backend = HatchetBackend(hatchet)
    registrations = TimerRegistrations(ledger, backend=backend, served=served)
    slots = config.timers.hatchet_slots
    task = fire_task(
        hatchet,
        deliver,
        retry,
        grace,
        hand_back=registrations.hand_back,
        deliveries=slots,
        warm=served_only(activate, registrations.serves),
    )
    engine_slots = max(ENGINE_SLOTS, slots)  # tasks waiting for their fire time hold one each
    worker = hatchet.worker("owlclaw-timers", slots=engine_slots, workflows=[task])
    threading.Thread(target=_exit_when_deaf, args=(worker,), name="deaf", daemon=True).start()
    worker.start()
    if _deaf(worker):  # the SDK stopped on its own: it receives no fire any more
        _exit_deaf()


def _deaf(worker: Any) -> bool:
    """hatchet-sdk's own check found its action-listener process dead: it no longer receives
    tasks. The SDK does not retry a refused ``Register``, so an engine that restarts while the
    listener registers kills it."""
    from hatchet_sdk.worker.worker import WorkerStatus

    return bool(worker.status is WorkerStatus.UNHEALTHY)


def _exit_when_deaf(worker: Any) -> None:
    """End the process once the worker is deaf, for whoever started it (``owlclaw run``'s
    supervisor, a container's restart policy) to start a new one. The SDK's own exit cannot be
    waited for: it sets an event shared with the dead process and hangs if that process held
    the event's lock."""
    while not _deaf(worker):
        time.sleep(1.0)
    _exit_deaf()


def _exit_deaf() -> None:
    log.error(
        "Hatchet's action listener died, so this worker receives no fire; exiting (status 1)"
        " to be started again"
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _via_server(config: OwlClawConfig) -> tuple[Deliver, Warm]:
    """Deliver fires to (and activate agents on) the ``owlclaw run`` server that hosts the
    agents (local placement)."""
    from owlclaw.client import ServerClient

    client = ServerClient(config)

    async def deliver(fire: Fire) -> FireOutcome:
        return await asyncio.to_thread(client.fire, fire)

    async def activate(agent_id: str) -> float:
        return await asyncio.to_thread(client.activate, agent_id)

    return deliver, activate
