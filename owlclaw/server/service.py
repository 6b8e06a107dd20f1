"""``owlclaw run``: one process that serves agent apps on the configured parts.

It starts (or joins) the database, keeps every projection current, runs the timer service
(built-in worker, or Hatchet: an external engine, or the locally built one started here),
places the agents (Ray actors, or hosted in this process), queues heartbeats and serves the
webhook endpoint. Runs are accepted durably (RunQueued committed) before anyone is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from events import Ledger, LedgerReadError, UnknownAgent
from owlclaw.agents import Agents
from owlclaw.app import AgentApp
from owlclaw.compose.read import open_views
from owlclaw.compose.write import place_agents, start_hosts, start_timers
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database, open_database
from owlclaw.messages import (
    Activate,
    AnswerApproval,
    ApprovalAnswer,
    Decision,
    ExpireApprovals,
    Message,
    Submit,
)
from owlclaw.runtime.approvals import PendingApproval, agent_of, overdue, pending
from owlclaw.server.metrics import Metrics
from owlclaw.server.serving_locks import ServingLocks, server_name
from owlclaw.supervisor import Supervisor
from owlclaw.timers.hatchet_engine import HatchetEngine, HatchetUnavailable, start_engine
from owlclaw.timers.registrations import BuiltinBackend, TimerBackend
from owlclaw.timers.worker import TimerWorker
from owlclaw.tools.subagents import watch_subagents
from projections import MemoryView, ProjectionRunner, View
from projections.embedders import Embedder

HATCHET_DATABASE = "owlclaw_hatchet"
EXPIRY_CHECK_S = 5.0
"""How often served agents' pending approvals are checked for their expiry."""
WORKER_START_S = 60.0
LOCK_CHECK_S = 5.0
"""How often the serving locks' connection is checked (and the locks taken again)."""
V = TypeVar("V", bound=View)
R = TypeVar("R")


class NotServed(KeyError):
    """The agent is not one of the apps this service serves."""

    def __str__(self) -> str:
        return f"agent {self.args[0]!r} is not served here"


class Service:
    def __init__(
        self,
        config: OwlClawConfig,
        apps: Sequence[AgentApp],
        *,
        progress: Callable[[str], None] = lambda _: None,
    ):
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
        self._engine: HatchetEngine | None = None
        self._engine_starting: asyncio.Task[HatchetEngine] | None = None
        self.ready = False
        """Every part started: the webhook answers 503 until then."""
        self._hatchet_worker: subprocess.Popen[bytes] | None = None
        self._warming: asyncio.Task[list[list[float]]] | None = None
        self._locks: ServingLocks | None = None
        self.views: list[View] = []
        """The projections' views this service keeps current (read by the console)."""

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.progress("database")
        self.database = await asyncio.to_thread(open_database, self.config)
        self.ledger = Ledger(
            self.database.url, snapshot_interval=self.config.ledger.snapshot_interval
        )
        self._locks = self._serving_locks(self.database)
        await asyncio.to_thread(self._locks.acquire)  # before this server touches its agents
        self.supervisor.start("serving-locks", self._hold_locks)
        self.metrics.position = await asyncio.to_thread(self.ledger.head)
        self.supervisor.start_thread("metrics", functools.partial(self.metrics.follow, self.ledger))
        for agent_id, app in self.apps.items():
            await asyncio.to_thread(self.ledger.attach_app, agent_id, str(app.root))
        if self.config.timers.backend == "hatchet" and not os.environ.get("HATCHET_CLIENT_TOKEN"):
            self.progress("Hatchet engine (in the background)")
            self._engine_starting = asyncio.create_task(asyncio.to_thread(self._start_engine))
        self.progress("projections")
        views = await asyncio.to_thread(open_views, self.ledger, self.config, self._embedder())
        self.views = views
        self.progress(f"agents ({self.config.runtime.placement} placement)")
        self._agents = self._place_agents()  # Ray wants its driver set up on the main thread
        # The embedding model is loaded now, not in the first memory's batch or recall. Hosted
        # here, the load waits: in a thread beside the agents' start it contends for the GIL.
        embedder = self.view(MemoryView).embedder
        self._warming = asyncio.create_task(asyncio.to_thread(embedder.embed, ["warm-up"]))
        if self.config.runtime.placement == "local":
            await self._warming
        self.projections = [ProjectionRunner(self.ledger, view) for view in views]
        for runner in self.projections:
            self.supervisor.start_thread(f"projection:{runner.view.name}", runner.serve)
        if self.config.timers.backend == "hatchet":  # hosts made here, with this config, before
            await start_hosts(self._agents, self._as_client())  # the Hatchet worker needs them
        for agent_id in self.apps:  # the first trigger should not wait for imports
            await self.agents.ask(Activate(agent_id=agent_id))
        self.progress(f"timer service ({self.config.timers.backend})")
        if self._engine_starting is not None:
            self._engine = await self._engine_starting
        worker, runner = await asyncio.to_thread(self._timers)
        self.projections.append(runner)
        self.supervisor.start_thread(f"projection:{runner.view.name}", runner.serve)
        self.supervisor.start("timer-worker", worker.run)
        self.supervisor.start("approval-expiry", self._expire_approvals)
        self.supervisor.start("subagent-watch", self._watch_subagents)
        for agent_id, app in self.apps.items():
            if app.settings.heartbeat_s > 0:
                beat = functools.partial(self._heartbeat, agent_id, app.settings.heartbeat_s)
                self.supervisor.start(f"heartbeat:{agent_id}", beat)
        await self._warming
        self.ready = True

    async def stop(self) -> None:
        """Stop whatever started (also after a start that failed half-way)."""
        self.ready = False
        await self.supervisor.stop()
        if self._engine_starting is not None and self._engine is None:
            with contextlib.suppress(Exception):
                self._engine = await self._engine_starting
        if self._hatchet_worker is not None:  # first: it delivers through Ray
            self._hatchet_worker.terminate()
            await asyncio.to_thread(self._hatchet_worker.wait, 30)
        # Started at once: Ray's disconnect below blocks this event loop.
        engine_stopped = asyncio.get_running_loop().run_in_executor(None, self._stop_engine)
        if self._agents is not None:
            await self._agents.close()
        if self._warming is not None:  # a start that failed half-way may have left it running
            with contextlib.suppress(Exception):
                await self._warming
        if self.config.runtime.placement != "local":
            from actors.cluster import disconnect

            disconnect()
        await engine_stopped
        if self._locks is not None:
            self._locks.release()
        if self.ledger is not None:
            self.ledger.close()

    def _serving_locks(self, database: Database) -> ServingLocks:
        """The served agents' locks, shared by the servers of one configured Ray cluster."""
        shared = self.config.ray_address is not None and self.config.runtime.placement != "local"
        server = self.config.server
        name = server_name(server.host, server.port, self.config.ray_address if shared else None)
        return ServingLocks(database.url, name, list(self.apps), shared=shared)

    async def _hold_locks(self, stop: asyncio.Event) -> None:
        """Every ``LOCK_CHECK_S``, check the locks' connection, taking them again after a
        database restart (one that another server took meanwhile fails this worker, which
        ``owlclaw status`` shows)."""
        assert self._locks is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), LOCK_CHECK_S)
                return
            await asyncio.to_thread(self._locks.check)

    def _stop_engine(self) -> None:
        """The engine's clean stop takes ~5 s (Hatchet waits out its partitioner's heartbeat):
        it runs beside the agents' and Ray's stop, which do not need it."""
        if self._engine is not None:
            self._engine.stop()

    def _embedder(self) -> Embedder | None:
        """With agents on Ray, the node's embedding actor, which the hosts on this node use
        too: one model (~800 MB) per node instead of another in this process."""
        if self.config.runtime.placement == "local":
            return None
        from actors.embedding import NodeEmbedder

        memory = self.config.memory
        return NodeEmbedder(memory.embedding_model, memory.embedding_dimensions)

    def _place_agents(self) -> Agents:
        assert self.ledger is not None
        if self.config.runtime.placement != "local":
            from actors.cluster import connect

            connect(self.config, logging_level=logging.ERROR)
        return place_agents(self.ledger, self._as_client(), owner=True)

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

    def _timer_backend(self) -> TimerBackend:
        if self.config.timers.backend != "hatchet":
            return BuiltinBackend()
        env = dict(os.environ)
        if self._engine is not None:  # the local engine: clients here and in the worker use it
            env |= self._engine.client_env
            os.environ.update(self._engine.client_env)
        self._hatchet_worker = self._spawn_hatchet_worker(env)
        from hatchet_sdk import Hatchet

        from owlclaw.timers.hatchet_backend import TASK, HatchetBackend

        hatchet = Hatchet()
        deadline = time.monotonic() + WORKER_START_S
        while not hatchet.workflows.list(workflow_name=TASK).rows:  # fires need its task
            if self._hatchet_worker.poll() is not None or time.monotonic() > deadline:
                raise HatchetUnavailable(
                    f"the Hatchet worker did not register {TASK} within {WORKER_START_S:g} s;"
                    f" see {self.config.data_path / 'hatchet-worker.log'}"
                )
            time.sleep(0.5)
        self.timer_backend = "hatchet"
        return HatchetBackend(hatchet)

    def _start_engine(self) -> HatchetEngine:
        assert self.database is not None
        bin_dir = Path(self.config.timers.hatchet_bin or self.config.data_path / "bin")
        database = self.database.create_database(HATCHET_DATABASE)
        return start_engine(database.url, self.config.data_path / "hatchet", bin_dir)

    def _spawn_hatchet_worker(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """``owlclaw timers hatchet-worker`` as its own process (the SDK's worker owns its event
        loop and signals); it delivers fires to the same agents as this process."""
        runtime = self.config.runtime
        env = {**env, "OWLCLAW_PLACEMENT": runtime.placement, "OWLCLAW_HOSTS": str(runtime.hosts)}
        command = [sys.executable, "-m", "owlclaw", "timers", "hatchet-worker"]
        command += [f"--agent={agent_id}" for agent_id in self.apps]
        if self.config.runtime.placement == "local":
            command.append("--via-server")  # the agents' one writer is this process
            server = self.config.server
            env |= {
                "OWLCLAW_SERVER_HOST": server.host,
                "OWLCLAW_SERVER_PORT": str(server.port),
                "OWLCLAW_DATA_DIR": str(self.config.data_path),  # the generated token's home
            }
            if server.token:
                env["OWLCLAW_SERVER_TOKEN"] = server.token
        else:
            import ray

            env["OWLCLAW_RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
        client = self._as_client()
        env["OWLCLAW_DATABASE_URL"] = str(client.database_url)
        env["OWLCLAW_DATABASE_NAME"] = client.database_name
        log_path = self.config.data_path / "hatchet-worker.log"
        return subprocess.Popen(
            command,
            env=env,
            stdout=log_path.open("ab"),
            stderr=subprocess.STDOUT,
        )

    async def _heartbeat(self, agent_id: str, every_s: float, stop: asyncio.Event) -> None:
        """Queue a heartbeat run every ``every_s`` until stopped (a failure to queue one is
        raised: the supervisor reports it and starts the beat again)."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
                return
            await self.ask(Submit(agent_id=agent_id, trigger="heartbeat"))

    async def _expire_approvals(self, stop: asyncio.Event) -> None:
        """Every ``EXPIRY_CHECK_S``, expire the served agents' overdue approvals (read from the
        ledger, so an agent that is not active is activated for it)."""
        assert self.ledger is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), EXPIRY_CHECK_S)
                return
            for agent_id in await asyncio.to_thread(overdue, self.ledger, list(self.apps)):
                await self.agents.ask(ExpireApprovals(agent_id=agent_id))

    async def _watch_subagents(self, stop: asyncio.Event) -> None:
        """Every ``EXPIRY_CHECK_S``, bring back sub-agent runs a dead host left behind and
        re-send reports that never reached their parent (``watch_subagents``)."""
        assert self.ledger is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), EXPIRY_CHECK_S)
                return
            await watch_subagents(self.ledger, self.agents, list(self.apps))

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

    async def answer_approval(self, decision: Decision) -> ApprovalAnswer:
        """Answer a served agent's approval through its writer; the parked run resumes."""
        assert self.ledger is not None
        served = list(self.apps)
        agent_id = await asyncio.to_thread(agent_of, self.ledger, decision.approval_id, served)
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
                "app_error": state.app_error,
                "app_warning": state.app_warning,
            }
        return {
            "placement": self.config.runtime.placement,
            "timer_backend": self.timer_backend,
            "hatchet": self._hatchet_health(),
            "agents": agents,
            "workers": [msgspec.to_builtins(w) for w in self.supervisor.status()],
        }

    def _hatchet_health(self) -> str:
        if self.timer_backend != "hatchet":
            return "not used"
        worker = self._hatchet_worker
        if worker is None or worker.poll() is not None:
            return "worker stopped"
        if self._engine is not None and not self._engine.running():
            return "local engine stopped"
        return "ok (local engine)" if self._engine is not None else "ok"
