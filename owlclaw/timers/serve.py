"""The timer service processes: ``owlclaw timers serve`` (registration + built-in worker) and
``owlclaw timers hatchet-worker`` (the Hatchet task that receives fires). Fires go to the agents'
Ray actors when ``runtime.placement`` is ``dedicated`` or ``shared``, else to agents hosted in
the service's own process."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from datetime import timedelta

from events import Ledger
from owlclaw.agents import LocalAgents
from owlclaw.config import OwlClawConfig
from owlclaw.supervisor import Supervisor
from owlclaw.timers.hatchet_backend import HatchetBackend, fire_task
from owlclaw.timers.service import BuiltinBackend, TimerBackend, TimersView
from owlclaw.timers.worker import Deliver, RetryPolicy, TimerWorker
from projections import ProjectionRunner, open_memory


def _deliver(ledger: Ledger, config: OwlClawConfig) -> tuple[Deliver, Callable[[], None]]:
    """Where fires go: the agents' Ray actors, or agents hosted in this process."""
    if config.runtime.placement != "local":
        from actors.cluster import connect
        from actors.directory import AgentDirectory

        connect(config)
        directory = AgentDirectory(ledger, config, placement=config.runtime.placement)
        return directory.fire, lambda: None  # the actors are detached: they stay
    agents = _agents(ledger, config)
    return agents.fire, agents.close


def _agents(ledger: Ledger, config: OwlClawConfig) -> LocalAgents:
    return LocalAgents(ledger, config, memory=open_memory(ledger, config))


def _backend(config: OwlClawConfig) -> TimerBackend:
    if config.timers.backend == "hatchet":
        from hatchet_sdk import Hatchet

        return HatchetBackend(Hatchet())
    return BuiltinBackend()


def start_timers(
    ledger: Ledger, config: OwlClawConfig, backend: TimerBackend, deliver: Deliver
) -> tuple[TimerWorker, ProjectionRunner]:
    """The timer projection's runner (it registers schedules with ``backend``, after moving
    timers other backends hold) and the worker that fires built-in timers to ``deliver``;
    neither is running yet: the caller supervises ``runner.serve`` and ``worker.run``."""
    view = TimersView(ledger.recorder.datastore, backend=backend, ledger=ledger)
    view.create_table()
    view.adopt()
    runner = ProjectionRunner(ledger, view)
    worker = TimerWorker(
        view,
        deliver,
        lease=timedelta(seconds=config.timers.lease_s),
        retry=RetryPolicy(max_retries=config.timers.max_retries),
        grace=timedelta(seconds=config.timers.misfire_grace_s),
    )
    return worker, runner


def serve(ledger: Ledger, config: OwlClawConfig) -> None:
    """Register schedules from the log and fire built-in timers until SIGINT/SIGTERM."""
    deliver, close = _deliver(ledger, config)
    worker, runner = start_timers(ledger, config, _backend(config), deliver)

    async def main() -> None:
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

    try:
        asyncio.run(main())
    finally:
        close()


def hatchet_worker(ledger: Ledger, config: OwlClawConfig) -> None:
    """Run the Hatchet worker that delivers fires (blocks; Hatchet handles signals)."""
    from hatchet_sdk import Hatchet

    hatchet = Hatchet()
    deliver, close = _deliver(ledger, config)
    retry = RetryPolicy(max_retries=config.timers.max_retries)
    task = fire_task(hatchet, deliver, retry, timedelta(seconds=config.timers.misfire_grace_s))
    try:
        hatchet.worker("owlclaw-timers", workflows=[task]).start()
    finally:
        close()
