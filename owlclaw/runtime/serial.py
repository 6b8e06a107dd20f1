"""One agent's ledger calls, in order, on threads a whole host shares.

An agent's commits must reach the ledger in the order its run made them (one is submitted
while the run goes on, and the next call must not overtake it), which a one-thread executor per
agent guarantees at the price of a thread per hosted agent: a host of 1,000 agents switched
between 1,000 threads. A ``SerialExecutor`` gives the same order on a pool the host sizes to
its database connections.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class SerialExecutor(Executor):
    """Runs the calls submitted to it one at a time, in submission order, on ``pool``."""

    def __init__(self, pool: Executor):
        self._pool = pool
        self._calls: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = False
        self._shut = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._calls.append((future, lambda: fn(*args, **kwargs)))
            if self._busy:
                return future
            self._busy = True
        try:
            self._pool.submit(self._drain)
        except BaseException:  # the pool is shut down: nothing of this call runs
            with self._lock:
                self._calls.clear()
                self._done()
            raise
        return future

    def _drain(self) -> None:
        """Run calls until none is left (an agent has a call or two queued at most: the
        commit in flight and the one after it)."""
        while True:
            with self._lock:
                if self._done():
                    return
                future, call = self._calls.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as error:  # the caller's, raised where it awaits the future
                    future.set_exception(error)

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
                    self._calls.popleft()[0].cancel()
            if wait:
                self._idle.wait_for(lambda: not self._busy)


class LedgerCalls:
    """An agent's synchronous ledger calls, awaited in order on its executor (one thread of
    its own, or a host's shared pool through a ``SerialExecutor``) so the event loop never
    blocks."""

    def __init__(self, executor: Executor):
        self.executor = executor

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
