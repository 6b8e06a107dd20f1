"""One agent's ledger calls, in order, on threads a whole host shares.

An agent's commits must reach the ledger in the order its run made them (one is submitted
while the run goes on, and the next call must not overtake it), which a one-thread executor per
agent guarantees at the price of a thread per hosted agent: a host of 1,000 agents switched
between 1,000 threads. A ``SerialExecutor`` gives the same order on a pool the host sizes to
its database connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

from owlclaw.tools.threads import settle_threadsafe

P = ParamSpec("P")
T = TypeVar("T")


class SerialExecutor(Executor):
    """Runs the calls submitted to it one at a time, in submission order, on ``pool``."""

    def __init__(self, pool: Executor):
        self._pool = pool
        self._calls: deque[tuple[Callable[[], None], Callable[[], object]]] = deque()
        """(run the call and deliver its outcome, cancel it) in submission order."""
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = False
        self._shut = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # the caller's, raised where it awaits the future
                    future.set_exception(error)

        self._enqueue(run, future.cancel)
        return future

    def call(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` queued as ``submit`` queues it, its outcome set on a future of the
        running loop: what ``loop.run_in_executor(self, ...)`` gives, without a concurrent
        future between the two (futures' Conditions and the callbacks chaining them to the
        loop's were ~5 % of a host's samples holding the GIL in py-spy, ``bench actors``, at
        a few ledger calls a run). Not run if the future was cancelled before its turn, as
        ``run_in_executor``'s call is not."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def run() -> None:
            if future.cancelled():
                return
            try:
                result, error = fn(*args), None
            except BaseException as e:  # the caller's, raised where it awaits the future
                result, error = None, e
            settle_threadsafe(future, result, error)

        def cancel() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(future.cancel)

        self._enqueue(run, cancel)
        return future

    def _enqueue(self, run: Callable[[], None], cancel: Callable[[], object]) -> None:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._calls.append((run, cancel))
            if self._busy:
                return
            self._busy = True
        try:
            self._pool.submit(self._drain)
        except BaseException:  # the pool is shut down: nothing of this call runs
            with self._lock:
                self._calls.clear()
                self._done()
            raise

    def _drain(self) -> None:
        """Run calls until none is left (an agent has a call or two queued at most: the
        commit in flight and the one after it)."""
        while True:
            with self._lock:
                if self._done():
                    return
                run, _ = self._calls.popleft()
            run()

    def _done(self) -> bool:
        """With the lock held: nothing left to run (shutdown may have cancelled the rest)."""
        if self._calls:
            return False
        self._busy = False
        self._idle.notify_all()
        return True

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new calls; with ``wait``, return once every call submitted has run (the
        shared pool itself stays up: its owner shuts it down)."""
        with self._lock:
            self._shut = True
            if cancel_futures:
                while self._calls:
                    self._calls.popleft()[1]()
            if wait:
                self._idle.wait_for(lambda: not self._busy)


class LedgerCalls:
    """An agent's synchronous ledger calls, awaited in order on its ``SerialExecutor`` (a
    host's shared pool, or one thread of the agent's own: ``owned``, shut down with it) so the
    event loop never blocks."""

    def __init__(self, pool: Executor, *, owned: bool = False):
        self.executor = SerialExecutor(pool)
        self._owned = pool if owned else None

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Queued now, behind the calls before it; awaited later (a commit in flight)."""
        return self.executor.call(fn, *args)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.executor.call(fn, *args)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        if self._owned is not None:
            self._owned.shutdown(wait=True)
