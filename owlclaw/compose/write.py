"""The write side from the configuration: where the agents' one writer runs (placement) and the
timer service that delivers fires to it.

Ray, the agents' runtime and the Hatchet SDK (seconds to import) are imported only when the
configuration asks for them.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from datetime import timedelta

from events import Ledger
from owlclaw.agents import Agents
from owlclaw.compose.memory import open_recall
from owlclaw.compose.read import open_timer_registrations
from owlclaw.config import OwlClawConfig
from owlclaw.timers.registrations import BuiltinBackend, TimerBackend
from owlclaw.timers.worker import Deliver, RetryPolicy, TimerWorker
from projections import ProjectionRunner
from projections.embedders import Embedder


def place_agents(
    ledger: Ledger,
    config: OwlClawConfig,
    *,
    owner: bool,
    idle_s: float | None = 300.0,
    recall: bool = True,
    embedder: Embedder | None = None,
    import_litellm: bool = True,
) -> Agents:
    """The configured placement: the cluster's actors (``owner``: this process started them and
    stops them; ``runtime.hosts`` of them with ``shared`` placement), or agents hosted in this
    process. An agent idle for ``idle_s`` is passivated (None: never); ``recall``: agents hosted
    here recall from the memory view (False: ``MEMORY_UNAVAILABLE``; Ray hosts open their own)
    with ``embedder`` (None: the configured model in this process); litellm's import starts in
    the background now, unless not ``import_litellm`` (then: on the first model call, or when the
    caller starts it, ``owlclaw.llm.providers.litellm_loading``)."""
    if config.runtime.placement == "local":
        from actors.host import AgentHost
        from owlclaw.runtime.models import LiteLLM

        memory = open_recall(ledger, config, embedder) if recall else None
        llm = LiteLLM(import_now=import_litellm)
        return AgentHost(ledger, config, idle_s=idle_s, memory=memory, llm=llm)
    from actors.cluster import connect
    from actors.directory import AgentDirectory

    connect(config)
    placement = config.runtime.placement
    return AgentDirectory(ledger, config, placement=placement, idle_s=idle_s, owner=owner)


def views_embedder(config: OwlClawConfig) -> Embedder | None:
    """The embedder of the memory view in a process that places agents: with agents on Ray, the
    node's embedding actor, which the hosts on this node use too (one model, ~800 MB, per node
    instead of another in this process); None (the view's own model) with ``local`` placement."""
    if config.runtime.placement == "local":
        return None
    from actors.embedding import NodeEmbedder

    memory = config.memory
    return NodeEmbedder(memory.embedding_model, memory.embedding_dimensions)


async def start_hosts(agents: Agents, config: OwlClawConfig) -> None:
    """With ``shared`` placement, start every host actor now rather than on its first message."""
    if config.runtime.placement == "shared":
        from actors.directory import AgentDirectory

        assert isinstance(agents, AgentDirectory)
        await agents.start_hosts()


def starts_hatchet_engine(config: OwlClawConfig) -> bool:
    """Whether a serving process starts the locally built Hatchet engine: the configuration asks
    for Hatchet and the environment names no engine (``HATCHET_CLIENT_TOKEN``)."""
    return config.timers.backend == "hatchet" and not os.environ.get("HATCHET_CLIENT_TOKEN")


def timer_backend(config: OwlClawConfig) -> TimerBackend:
    """The configured backend, for a process that finds Hatchet in its environment."""
    if config.timers.backend == "hatchet":
        from hatchet_sdk import Hatchet

        from owlclaw.timers.hatchet_backend import HatchetBackend

        return HatchetBackend(Hatchet())
    return BuiltinBackend()


def start_timers(
    ledger: Ledger,
    config: OwlClawConfig,
    backend: TimerBackend,
    deliver: Deliver,
    served: Collection[str] | None = None,
    *,
    batch: int = 100,
    adopt: bool = True,
) -> tuple[TimerWorker, ProjectionRunner]:
    """The timer registrations' runner (it registers schedules with ``backend``, after moving
    timers other backends hold, unless not ``adopt``) and the worker that fires the ``served``
    agents' built-in timers (None: every agent's) to ``deliver``, up to ``batch`` claimed at
    once; neither is running yet: the caller supervises ``runner.serve`` and ``worker.run``."""
    registrations = open_timer_registrations(ledger, backend, served, adopt=adopt)
    runner = ProjectionRunner(ledger, registrations)
    worker = TimerWorker(
        registrations,
        deliver,
        lease=timedelta(seconds=config.timers.lease_s),
        retry=RetryPolicy(max_retries=config.timers.max_retries),
        grace=timedelta(seconds=config.timers.misfire_grace_s),
        batch=batch,
    )
    return worker, runner
