"""``owlclaw run``: one process that serves agent apps on the configured parts.

It starts (or joins) the database, keeps every projection current (rebuilding in the
background, while the old tables serve, a view an older version of its code built; refusing
one a newer OwlClaw built), runs the timer service
(built-in worker, or Hatchet: an external engine, or the locally built one started here),
places the agents (Ray actors, or hosted in this process), queues heartbeats and serves the
webhook endpoint. Runs are accepted durably (RunQueued committed) before anyone is told.
Its recurring duties (serving locks, approval expiry, sub-agent watch, heartbeats) are
``owlclaw.server.duties``; the Hatchet engine and worker it starts, ``owlclaw.server.hatchet``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import msgspec

from events import Ledger, LedgerReadError, UnknownAgent
from events.streams import now
from owlclaw.access.authorize import Principal
from owlclaw.access.store import PrincipalStore
from owlclaw.agents import Agents
from owlclaw.app import AgentApp
from owlclaw.compose.memory import LoadedInBackground
from owlclaw.compose.read import ConfiguredView, open_served_views
from owlclaw.compose.write import (
    place_agents,
    start_hosts,
    start_timers,
    starts_hatchet_engine,
    views_embedder,
)
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database, open_database
from owlclaw.heartbeat.config import heartbeat_sources
from owlclaw.heartbeat.wake import SourceResult
from owlclaw.llm.providers import litellm_loading
from owlclaw.messages import (
    Activate,
    AnswerApproval,
    ApprovalAnswer,
    Decision,
    Message,
)
from owlclaw.reports.approvals import PendingApproval, pending
from owlclaw.runtime.approvals import agent_of, check_approver
from owlclaw.runtime.secrets import secret_values
from owlclaw.server.duties import (
    approval_expiry,
    archive_retention,
    heartbeat,
    hold_locks,
    memory_ages,
    subagent_watch,
)
from owlclaw.server.hatchet import HatchetParts
from owlclaw.server.metrics import Metrics
from owlclaw.server.serving_locks import ServingLocks, server_name
from owlclaw.server.startup import StartupTimes
from owlclaw.supervisor import Supervisor
from owlclaw.timers.registrations import BuiltinBackend, TimerBackend
from owlclaw.timers.worker import TimerWorker
from projections import MemoryView, ProjectionRunner, View
from projections.embedders import Embedder, embedder_for
from projections.memory_ages import AgePolicy
from projections.rebuild import upgrade

V = TypeVar("V", bound=View)
R = TypeVar("R")


class NotServed(KeyError):
    """The agent is not one of the apps this service serves."""

    def __str__(self) -> str:
        return f"agent {self.args[0]!r} is not served here"


HOSTS_TIMEOUT_S = 5.0
"""How long a status report or a metrics scrape waits for the agents' hosts to answer."""


class Service:
    def __init__(
        self,
        config: OwlClawConfig,
        apps: Sequence[AgentApp],
        *,
        progress: Callable[[str], None] = lambda _: None,
        before_model_load: Callable[[], object] = lambda: None,
    ):
        """``progress`` is told each phase of the start; ``before_model_load`` runs in the
        embedding model's background load before the model loads (a test holds it there)."""
        self.config = config
        self.apps = {app.agent_id: app for app in apps}
        self.progress = progress
        self.database: Database | None = None
        self.ledger: Ledger | None = None
        self._agents: Agents | None = None
        self.timer_backend = "builtin"
        self.supervisor = Supervisor()
        """Runs the projection runners, the timer worker, the heartbeats and the metrics."""
        self.projections: list[ProjectionRunner] = []
        """The runners of every view, for their status (lag, parked events)."""
        self.metrics = Metrics()
        """What ``GET /metrics`` serves: counted from the ledger, from its head at start."""
        self._hatchet = HatchetParts(config)
        """The local Hatchet engine and the Hatchet worker, with the ``hatchet`` backend."""
        self.ready = False
        """Every part started: the webhook answers 503 until then."""
        self.embedder: LoadedInBackground | None = None
        """The memory view's embedder (and local recall's): its model loads once serving."""
        self.before_model_load = before_model_load
        self.startup = StartupTimes()
        self._locks: ServingLocks | None = None
        self.views: list[View] = []
        """The projections' views this service keeps current (read by the console)."""
        self.principals: PrincipalStore | None = None
        """Who may use the webhook besides the server token (``owlclaw.server.guard``)."""
        self.last_beats: dict[str, list[SourceResult]] = {}
        """Each agent's heartbeat sources as its last beat found them (``owlclaw status``)."""

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        # submitted now (a to_thread coroutine would start only at the first await, after Ray's)
        opening = asyncio.get_running_loop().run_in_executor(None, open_database, self.config)
        if self.config.runtime.placement != "local":  # while PostgreSQL starts in its thread
            self._phase("ray", "Ray")
            self._connect_ray()  # Ray wants its driver set up on the main thread
        self._phase("postgresql", "PostgreSQL")
        self.database = await opening
        self._phase("database", "database")
        self.ledger = await self._open_ledger(self.database)
        self._locks = self._serving_locks(self.database)
        await asyncio.to_thread(self._locks.acquire)  # before this server touches its agents
        self.supervisor.start("serving-locks", functools.partial(hold_locks, self._locks))
        self.metrics.position = await asyncio.to_thread(self.ledger.log.head)
        self.supervisor.start_thread("metrics", functools.partial(self.metrics.follow, self.ledger))
        for agent_id, app in self.apps.items():
            await asyncio.to_thread(self.ledger.attach_app, agent_id, str(app.root))
        if starts_hatchet_engine(self.config):
            self._phase("hatchet_engine", "Hatchet engine (in the background)")
            self._hatchet.start_engine(self.database)
        self._phase("projections", "projections")
        self.embedder = LoadedInBackground(self._views_embedder())
        views, behind = await asyncio.to_thread(
            open_served_views, self.ledger, self.config, self.embedder
        )
        self.views = views
        self._phase("agents", f"agents ({self.config.runtime.placement} placement)")
        self._agents = place_agents(
            self.ledger,
            self._as_client(),
            owner=True,
            embedder=self.embedder,
            import_litellm=False,  # once serving (below)
        )
        self.projections = [ProjectionRunner(self.ledger, view) for view in views]
        for runner in self.projections:
            self.supervisor.start_thread(f"projection:{runner.view.name}", runner.serve)
        for configured in behind:
            self.supervisor.start_thread(
                f"upgrade:{configured.name}", self._upgrade(configured), once=True
            )
        if self.config.timers.backend == "hatchet":  # hosts made here, with this config, before
            await start_hosts(self._agents, self._as_client())  # the Hatchet worker needs them
        for agent_id in self.apps:  # the first trigger should not wait for imports
            await self.agents.ask(Activate(agent_id=agent_id))
        self._phase("timers", f"timer service ({self.config.timers.backend})")
        await self._hatchet.engine_started()
        self._supervise_timers(*await asyncio.to_thread(self._timers))
        self._phase("duties", "recurring duties")
        served = list(self.apps)
        expiry = functools.partial(approval_expiry, self.ledger, self.agents, served)
        self.supervisor.start("approval-expiry", expiry)
        watch = functools.partial(subagent_watch, self.ledger, self.agents, served)
        self.supervisor.start("subagent-watch", watch)
        if (days := self.config.ledger.archive_after_days) is not None:

            def days_ago() -> datetime:
                return now() - timedelta(days=days)

            retention = functools.partial(archive_retention, self.ledger, served, days_ago)
            self.supervisor.start("archive-retention", retention)
        self._start_memory_ages(served)
        self._start_heartbeats()
        self.startup.serving()
        self.ready = True
        self._load_in_background()

    def _phase(self, name: str, told: str) -> None:
        """Begin phase ``name`` of the start, telling ``progress`` what starts."""
        self.startup.begin(name)
        self.progress(told)

    def _load_in_background(self) -> None:
        """What the first recall and the first model call need, loaded while the server serves
        (each waits for its load; nothing else does)."""
        self.progress("background loads (embedding model, litellm)")
        assert self.embedder is not None
        loading = self.embedder.start(self.before_model_load)
        self.startup.time_background("embedding_model", loading)
        if self.config.runtime.placement == "local":  # Ray's hosts import it in their processes
            self.startup.time_background("litellm", litellm_loading())

    def _start_memory_ages(self, served: Sequence[str]) -> None:
        """Apply the memory age policy to the served agents, unless both its steps are off."""
        memory = self.config.memory
        policy = AgePolicy(memory.archive_after_days, memory.delete_after_days)
        if not policy.off:
            ages = functools.partial(memory_ages, self.view(MemoryView), policy, served)
            self.supervisor.start("memory-ages", ages)

    def _start_heartbeats(self) -> None:
        """A supervised heartbeat for each agent with ``heartbeat_s``, checking its sources."""
        for agent_id, app in self.apps.items():
            if app.settings.heartbeat_s > 0:
                sources = heartbeat_sources(app.config, app.settings, str(app.root))
                every_s = app.settings.heartbeat_s
                seen = functools.partial(self.last_beats.__setitem__, agent_id)
                beat = functools.partial(
                    heartbeat, self.ask, agent_id, every_s, sources=sources, seen=seen
                )
                self.supervisor.start(f"heartbeat:{agent_id}", beat)

    async def _open_ledger(self, database: Database) -> Ledger:
        """The ledger, redacting the apps' secrets from what it records, and its principals."""
        ledger = Ledger(
            database.url,
            snapshot_interval=self.config.ledger.snapshot_interval,
            archive_dir=self.config.archive_path,
            encrypt=self.config.ledger.encrypt,
        )
        for app in self.apps.values():  # what this process records (operators' acts) too
            ledger.redact(secret_values(app))
        self.principals = await asyncio.to_thread(PrincipalStore, ledger)
        await asyncio.to_thread(self.principals.catch_up)  # a change whose row never came
        return ledger

    async def stop(self) -> None:
        """Stop whatever started (also after a start that failed half-way)."""
        self.ready = False
        await self.supervisor.stop()
        await self._hatchet.stop_worker()  # first: it delivers through Ray
        # Started at once: Ray's disconnect below blocks this event loop.
        engine_stopped = asyncio.get_running_loop().run_in_executor(None, self._hatchet.stop_engine)
        if self._agents is not None:
            await self._agents.close()
        if self.config.runtime.placement != "local":
            from actors.cluster import disconnect

            disconnect()
        await engine_stopped
        if self._locks is not None:
            self._locks.release()
        if self.ledger is not None:
            self.ledger.close()

    def _upgrade(self, configured: ConfiguredView) -> Callable[[threading.Event], None]:
        """The job that rebuilds a view built by an older version of its code, from the start
        of the log into new tables, and switches over once caught up (the old tables serve
        meanwhile; the view's runner goes on from the switch)."""
        ledger = self.ledger
        assert ledger is not None

        def work(stop: threading.Event) -> None:
            upgrade(ledger, configured.view, stop, **configured.options)

        return work

    def _serving_locks(self, database: Database) -> ServingLocks:
        """The served agents' locks, shared by the servers of one configured Ray cluster."""
        shared = self.config.ray_address is not None and self.config.runtime.placement != "local"
        server = self.config.server
        name = server_name(server.host, server.port, self.config.ray_address if shared else None)
        return ServingLocks(database.url, name, list(self.apps), shared=shared)

    def _connect_ray(self) -> None:
        from actors.cluster import connect

        connect(self.config, logging_level=logging.ERROR)

    def _views_embedder(self) -> Embedder:
        """The node's embedding actor with agents on Ray (``views_embedder``), else the model in
        this process."""
        memory = self.config.memory
        shared = views_embedder(self.config)
        return shared or embedder_for(memory.embedding_model, memory.embedding_dimensions)

    @property
    def agents(self) -> Agents:
        if self._agents is None:
            raise RuntimeError("the service has not placed its agents yet")
        return self._agents

    def _as_client(self) -> OwlClawConfig:
        """The configuration for the processes this one starts (actors, the Hatchet worker):
        they connect to the database this process opened as plain clients, so the embedded
        server stops when this process does (killed actors would otherwise keep it alive)."""
        assert self.database is not None
        return msgspec.structs.replace(
            self.config,
            database_url=self.database.url,
            database_name=str(self.database.params.get("dbname", self.config.database_name)),
        )

    def _timers(self) -> tuple[TimerWorker, ProjectionRunner]:
        assert self.ledger is not None
        backend = self._timer_backend()
        return start_timers(self.ledger, self.config, backend, self.ask, served=list(self.apps))

    def _supervise_timers(self, worker: TimerWorker, runner: ProjectionRunner) -> None:
        self.projections.append(runner)
        self.supervisor.start_thread(f"projection:{runner.view.name}", runner.serve)
        self.supervisor.start("timer-worker", worker.run)
        if self.timer_backend == "hatchet":  # its process, started again when it exits
            self.supervisor.start("hatchet-worker", self._hatchet.keep_worker)

    def _timer_backend(self) -> TimerBackend:
        if self.config.timers.backend != "hatchet":
            return BuiltinBackend()
        backend = self._hatchet.backend(self._as_client(), list(self.apps))
        self.timer_backend = "hatchet"
        return backend

    # --- what clients ask for -------------------------------------------------------------

    def view(self, kind: type[V]) -> V:
        """The view of that kind (the service has started its projections)."""
        return next(v for v in self.views if isinstance(v, kind))

    def served(self, agent_id: str) -> AgentApp:
        app = self.apps.get(agent_id)
        if app is None:
            raise NotServed(agent_id)
        return app

    async def ask(self, message: Message[R]) -> R:
        """Hand a message to a served agent's writer (``NotServed`` for any other agent)."""
        self.served(message.agent_id)
        return await self.agents.ask(message)

    async def approval_agent(self, approval_id: str) -> str:
        """The served agent an approval is of (UnknownApproval if none)."""
        assert self.ledger is not None
        return await asyncio.to_thread(agent_of, self.ledger, approval_id, list(self.apps))

    async def answer_approval(self, decision: Decision, principal: Principal) -> ApprovalAnswer:
        """Answer a served agent's approval through its writer as ``principal``, who must hold
        ``approver`` on that agent and answer as itself (the server token's may name who
        answers; the record names the token too); the parked run resumes. NotApprover, and
        nothing recorded, otherwise."""
        agent_id = await self.approval_agent(decision.approval_id)
        check_approver(principal, agent_id, decision)
        decision = msgspec.structs.replace(decision, principal=principal.name)
        return await self.agents.ask(AnswerApproval(agent_id=agent_id, decision=decision))

    def pending_approvals(self) -> list[PendingApproval]:
        assert self.ledger is not None
        return pending(self.ledger, list(self.apps))

    def status(self) -> dict[str, Any]:
        """The served agents (one whose stream cannot be read says so in its ``unreadable``),
        placement, timer backend, Hatchet health and the supervised workers."""
        assert self.ledger is not None
        agents: dict[str, dict[str, Any]] = {}
        for agent_id, app in self.apps.items():
            try:
                state = self.ledger.load_agent(agent_id).state
            except UnknownAgent:
                continue
            except LedgerReadError as e:  # this agent only: the others are still shown
                agents[agent_id] = {
                    "app_dir": str(app.root),
                    "unreadable": f"{e}; check it with `owlclaw verify {agent_id}`",
                }
                continue
            agents[agent_id] = {
                "app_dir": str(app.root),
                "runs": state.run_count,
                "pending_events": state.pending_inbound,
                "schedules": len(state.schedules),
                "heartbeat_s": app.settings.heartbeat_s,
                "heartbeat_sources": {
                    r.source: {"kind": r.kind, "count": r.count, "error": r.error}
                    for r in self.last_beats.get(agent_id, [])
                },
                "app_error": state.app_error,
                "app_warning": state.app_warning,
            }
        return {
            "placement": self.config.runtime.placement,
            "timer_backend": self.timer_backend,
            "hatchet": self._hatchet_health(),
            "agents": agents,
            "workers": [msgspec.to_builtins(w) for w in self.supervisor.status()],
            "startup": self.startup.report(),
        }

    async def report(self) -> dict[str, Any]:
        """``status`` and the MCP servers as the agents' hosts are connected to them."""
        report = self.status()
        try:
            hosts = await asyncio.wait_for(self.agents.status(), HOSTS_TIMEOUT_S)
        except TimeoutError:
            hosts = None
        report["mcp_servers"] = (
            hosts.mcp_servers
            if hosts is not None
            else {"?": f"unavailable: the hosts did not answer in {HOSTS_TIMEOUT_S} s"}
        )
        return report

    def _hatchet_health(self) -> str:
        if self.timer_backend != "hatchet":
            return "not used"
        return self._hatchet.health()
