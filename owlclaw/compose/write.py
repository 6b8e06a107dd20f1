"""The write side from the configuration: where the agents' one writer runs (placement) and the
timer service that delivers fires to it.

Ray and the agents' runtime are imported only when placement asks for them.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from events import Ledger
from owlclaw.agents import Agents
from owlclaw.compose.memory import open_recall
from owlclaw.compose.read import open_timer_registrations
from owlclaw.config import OwlClawConfig
from owlclaw.timers.hatchet_backend import HatchetBackend
from owlclaw.timers.registrations import BuiltinBackend, TimerBackend
from owlclaw.timers.worker import Deliver, RetryPolicy, TimerWorker
from projections import ProjectionRunner


def place_agents(ledger: Ledger, config: OwlClawConfig, *, owner: bool) -> Agents:
    """The configured placement: the cluster's actors (``owner``: this process started them and
    stops them), or agents hosted in this process."""
    if config.runtime.placement == "local":
        from actors.host import AgentHost

        return AgentHost(ledger, config, idle_s=300.0, memory=open_recall(ledger, config))
    from actors.cluster import connect
    from actors.directory import AgentDirectory

    connect(config)
    return AgentDirectory(ledger, config, placement=config.runtime.placement, owner=owner)


async def start_hosts(agents: Agents, config: OwlClawConfig) -> None:
    """With ``shared`` placement, start every host actor now rather than on its first message."""
    if config.runtime.placement == "shared":
        from actors.directory import AgentDirectory

        assert isinstance(agents, AgentDirectory)
        await agents.start_hosts()


def timer_backend(config: OwlClawConfig) -> TimerBackend:
    """The configured backend, for a process that finds Hatchet in its environment."""
    if config.timers.backend == "hatchet":
        from hatchet_sdk import Hatchet

        return HatchetBackend(Hatchet())
    return BuiltinBackend()


def start_timers(
    ledger: Ledger,
    config: OwlClawConfig,
    backend: TimerBackend,
    deliver: Deliver,
    served: Collection[str] | None = None,
) -> tuple[TimerWorker, ProjectionRunner]:
    """The timer registrations' runner (it registers schedules with ``backend``, after moving
    timers other backends hold) and the worker that fires the ``served`` agents' built-in
    timers (None: every agent's) to ``deliver``; neither is running yet: the caller supervises
    ``runner.serve`` and ``worker.run``."""
    registrations = open_timer_registrations(ledger, backend, served)
    runner = ProjectionRunner(ledger, registrations)
    worker = TimerWorker(
        registrations,
        deliver,
        lease=timedelta(seconds=config.timers.lease_s),
        retry=RetryPolicy(max_retries=config.timers.max_retries),
        grace=timedelta(seconds=config.timers.misfire_grace_s),
    )
    return worker, runner
