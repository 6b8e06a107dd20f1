"""One supervisor for every background loop of a process (projection runners, the timer
worker, heartbeats).

A worker is named and runs until its stop event is set: an async function, or a blocking one
in a thread of its own; a one-off job (``once``) is done when it returns. When it raises (or a
worker returns before being stopped) the error is logged
with its traceback and the worker starts again after a capped exponential backoff with
jitter, so a transient failure (PostgreSQL restarting) heals by itself and a permanent one
keeps being reported instead of silently ending the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal

import msgspec

log = logging.getLogger(__name__)

State = Literal["running", "backing_off", "stopped", "failed", "done"]
AsyncWork = Callable[[asyncio.Event], Awaitable[None]]
BlockingWork = Callable[[threading.Event], None]


class WorkerStatus(msgspec.Struct):
    """What ``owlclaw status`` shows of a worker. ``failed``: it did not end within the bound
    of ``Supervisor.stop`` and was left behind."""

    name: str
    state: State = "running"
    restarts: int = 0
    last_error: str | None = None
    last_error_at: datetime | None = None
    started_at: datetime | None = None
    backoff_s: float = 0.0
    """The wait before the current (or last) restart."""


class WorkerReturned(RuntimeError):
    """A worker ended on its own although it was not asked to stop."""


def backoff(failures: int, initial_s: float, max_s: float) -> float:
    """The wait after ``failures`` consecutive failures, before jitter: doubling, capped."""
    return float(min(max_s, initial_s * 2 ** max(0, failures - 1)))


class Supervisor:
    """Runs named workers on the current event loop and restarts the ones that fail."""

    def __init__(
        self,
        *,
        initial_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        healthy_s: float = 60.0,
    ):
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.healthy_s = healthy_s
        """A worker that ran this long before failing starts again from the initial backoff."""
        self._workers: dict[str, WorkerStatus] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        self._thread_stops: list[threading.Event] = []

    def start(self, name: str, work: AsyncWork) -> None:
        """Supervise ``await work(stop)``."""
        self._spawn(name, lambda: work(self._stopping))

    def start_thread(self, name: str, work: BlockingWork, *, once: bool = False) -> None:
        """Supervise ``work(stop)`` run in a thread of its own (one thread per attempt);
        ``once``: a job, done (not restarted) when it returns without an error."""
        stop = threading.Event()
        self._thread_stops.append(stop)
        self._spawn(name, lambda: _in_thread(name, work, stop), once)

    def _spawn(self, name: str, attempt: Callable[[], Awaitable[None]], once: bool = False) -> None:
        if name in self._workers:
            raise ValueError(f"a worker named {name!r} is already supervised")
        status = self._workers[name] = WorkerStatus(name)
        task = self._supervise(status, attempt, once)
        self._tasks[name] = asyncio.create_task(task, name=name)

    async def _supervise(
        self, status: WorkerStatus, attempt: Callable[[], Awaitable[None]], once: bool
    ) -> None:
        failures = 0
        while True:
            status.state, status.started_at = "running", datetime.now(UTC)
            began = time.monotonic()
            try:
                await attempt()
                if self._stopping.is_set():
                    break
                if once:
                    status.state = "done"
                    return
                raise WorkerReturned(f"worker {status.name!r} returned without being stopped")
            except Exception as error:
                if self._stopping.is_set():  # an error on the way out ends it like a stop
                    log.warning("worker %s failed while stopping: %s", status.name, error)
                    break
                log.error("worker %s failed; restarting it", status.name, exc_info=error)
                status.last_error = f"{type(error).__name__}: {error}"
                status.last_error_at = datetime.now(UTC)
            failures = 1 if time.monotonic() - began >= self.healthy_s else failures + 1
            status.backoff_s = backoff(failures, self.initial_backoff_s, self.max_backoff_s)
            status.state = "backing_off"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._stopping.wait(), status.backoff_s * random.uniform(0.5, 1.0)
                )
            if self._stopping.is_set():
                break
            status.restarts += 1
        status.state = "stopped"

    def status(self) -> list[WorkerStatus]:
        return list(self._workers.values())

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Ask every worker to stop and wait for them, at most ``timeout_s`` in all; a worker
        still running then is reported ``failed`` (a thread cannot be killed: it is left)."""
        self._stopping.set()
        for event in self._thread_stops:
            event.set()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks.values(), timeout=timeout_s)
        for task in pending:
            log.error("worker %s did not stop within %g s", task.get_name(), timeout_s)
            self._workers[task.get_name()].state = "failed"
            task.cancel()


def _in_thread(name: str, work: BlockingWork, stop: threading.Event) -> Awaitable[None]:
    """``work(stop)`` in a new daemon thread; the future completes when it returns or raises."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def target() -> None:
        error: BaseException | None = None
        try:
            work(stop)
        except BaseException as e:
            error = e
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    return done
