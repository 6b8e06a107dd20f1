"""The Hatchet side of a served process: the local engine (when no external one is configured)
and the worker process that registers the fire task and delivers fires to the agents.

Its own module because only the ``hatchet`` timer backend needs any of it: the engine starts in
the background while the service starts its other parts, and stops beside the agents' stop.
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

from owlclaw import child_process
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.timers.hatchet_engine import HatchetEngine, HatchetUnavailable, start_engine
from owlclaw.timers.registrations import TimerBackend

HATCHET_DATABASE = "owlclaw_hatchet"
WORKER_START_S = 60.0
WORKER_STOP_S = 30.0
WATCH_S = 1.0

log = logging.getLogger(__name__)


class WorkerExited(RuntimeError):
    """The Hatchet worker process ended while the service runs (its supervisor starts another)."""


class HatchetParts:
    """The local engine (if started here) and the Hatchet worker process of one service."""

    def __init__(self, config: OwlClawConfig):
        self.config = config
        self.engine: HatchetEngine | None = None
        self._engine_starting: asyncio.Task[HatchetEngine] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self._spawn: Callable[[], subprocess.Popen[bytes]] | None = None

    @property
    def log_path(self) -> Path:
        """Where the worker processes write (appended: a restarted one's output follows)."""
        return self.config.data_path / "hatchet-worker.log"

    def start_engine(self, database: Database) -> None:
        """Start the local engine in the background (a thread: it takes seconds)."""
        self._engine_starting = asyncio.create_task(asyncio.to_thread(self._start, database))

    async def engine_started(self) -> None:
        """Wait for the local engine, if one is starting."""
        if self._engine_starting is not None:
            self.engine = await self._engine_starting

    def _start(self, database: Database) -> HatchetEngine:
        bin_dir = Path(self.config.timers.hatchet_bin or self.config.data_path / "bin")
        created = database.create_database(HATCHET_DATABASE)
        return start_engine(created.url, self.config.data_path / "hatchet", bin_dir)

    def backend(self, client: OwlClawConfig, served: Sequence[str]) -> TimerBackend:
        """The Hatchet timer backend, once the worker started here registered its task."""
        env = dict(os.environ)
        if self.engine is not None:  # the local engine: clients here and in the worker use it
            env |= self.engine.client_env
            os.environ.update(self.engine.client_env)
        self._spawn = functools.partial(self._spawn_worker, env, client, served)
        self.worker = self._spawn()
        from hatchet_sdk import Hatchet

        from owlclaw.timers.hatchet_backend import TASK, HatchetBackend

        hatchet = Hatchet()
        deadline = time.monotonic() + WORKER_START_S
        while not hatchet.workflows.list(workflow_name=TASK).rows:  # fires need its task
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise HatchetUnavailable(
                    f"the Hatchet worker did not register {TASK} within {WORKER_START_S:g} s;"
                    f" see {self.log_path}"
                )
            time.sleep(0.5)
        return HatchetBackend(hatchet)

    def _spawn_worker(
        self, env: dict[str, str], client: OwlClawConfig, served: Sequence[str]
    ) -> subprocess.Popen[bytes]:
        """``owlclaw timers hatchet-worker`` as its own process (the SDK's worker owns its event
        loop and signals); it delivers fires to the same agents as this process."""
        runtime = self.config.runtime
        env = {**env, "OWLCLAW_PLACEMENT": runtime.placement, "OWLCLAW_HOSTS": str(runtime.hosts)}
        command = [sys.executable, "-m", "owlclaw", "timers", "hatchet-worker"]
        command += [f"--agent={agent_id}" for agent_id in served]
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
        env["OWLCLAW_DATABASE_URL"] = str(client.database_url)
        env["OWLCLAW_DATABASE_NAME"] = client.database_name
        return subprocess.Popen(
            command,
            env=env,
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
        )

    async def keep_worker(self, stopping: asyncio.Event) -> None:
        """Supervised: watch the worker process, started again after its predecessor exited.
        A worker exits while the service runs when it lost its way to the engine for good (its
        listener died) or was killed; fires then wait in the engine until the next one."""
        assert self._spawn is not None, "the Hatchet backend was not started"
        if self.worker is None or self.worker.poll() is not None:
            self.worker = self._spawn()
        while not stopping.is_set():
            if (status := self.worker.poll()) is not None:
                raise WorkerExited(
                    f"the Hatchet worker exited with status {status}; see {self.log_path}"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), WATCH_S)

    async def stop_worker(self) -> None:
        """Stop the worker (first: it delivers through Ray), after an engine still starting."""
        if self._engine_starting is not None and self.engine is None:
            with contextlib.suppress(Exception):
                self.engine = await self._engine_starting
        if self.worker is not None and not await asyncio.to_thread(
            child_process.stop, self.worker, WORKER_STOP_S
        ):
            log.warning("the Hatchet worker did not exit %g s after SIGTERM: killed", WORKER_STOP_S)

    def stop_engine(self) -> None:
        """The engine's clean stop takes ~5 s (Hatchet waits out its partitioner's heartbeat):
        it runs beside the agents' and Ray's stop, which do not need it."""
        if self.engine is not None:
            self.engine.stop()

    def health(self) -> str:
        """The worker's and the local engine's state, for ``owlclaw status``."""
        if self.worker is None or self.worker.poll() is not None:
            return "worker stopped"
        if self.engine is not None and not self.engine.running():
            return "local engine stopped"
        return "ok (local engine)" if self.engine is not None else "ok"
