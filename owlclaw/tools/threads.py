"""Synchronous handlers run in worker threads so the event loop (and every other agent on the
host) keeps going while one blocks.

The threads are daemon threads, started per call under a bound: a call that timed out cannot be
stopped (Python threads cannot be killed), and a ``ThreadPoolExecutor``'s threads would hold
process exit until it returns. Its slot is released only when the thread really ends, so stuck
handlers never exceed the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

DEFAULT_WORKERS = 8


class HandlerThreads:
    def __init__(self, workers: int = DEFAULT_WORKERS, name: str = "handler"):
        self._slots = threading.BoundedSemaphore(workers)
        self._name = name

    async def call(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """``fn(**kwargs)`` in a worker thread; waits (without blocking the loop) while all
        workers are busy."""
        while not self._slots.acquire(blocking=False):
            await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def work() -> None:
            try:
                result, error = fn(**kwargs), None
            except BaseException as e:  # handed to the awaiting task, not lost in the thread
                result, error = None, e
            finally:
                self._slots.release()
            settle_threadsafe(done, result, error)

        threading.Thread(target=work, name=self._name, daemon=True).start()
        return await done


def settle_threadsafe(
    future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    """From a worker thread: the outcome of the call ``future`` awaits, set on its loop unless
    its caller gave up on it meanwhile; nothing if the loop is gone (nobody waits for it)."""
    loop = future.get_loop()
    outcomes = _outcomes.get(loop)
    if outcomes is None:
        outcomes = _outcomes.setdefault(loop, _Outcomes())
    with contextlib.suppress(RuntimeError):
        outcomes.put(loop, future, result, error)


class _Outcomes:
    """Outcomes handed to one loop by worker threads, set together: one wake of the loop (a
    callback and a write to its self-pipe) serves all that arrive before it runs, where a host
    under load had one per ledger call."""

    def __init__(self) -> None:
        self._ready: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self._scheduled = False

    def put(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        result: Any,
        error: BaseException | None,
    ) -> None:
        """Appended before the flag is read, and the flag cleared before the queue is emptied
        (both under the GIL): an outcome is always taken by a callback already scheduled or
        by the one this call schedules."""
        if loop.is_closed():
            self._ready.clear()  # nobody awaits them, and their futures would keep the loop
            return
        self._ready.append((future, result, error))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon_threadsafe(self._settle_all)

    def _settle_all(self) -> None:
        self._scheduled = False
        ready = self._ready
        while ready:
            _settle(*ready.popleft())


_outcomes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Outcomes] = (
    weakref.WeakKeyDictionary()
)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if isinstance(error, StopIteration):
        # asyncio refuses it on a future (TypeError): every other outcome of the batch would
        # wait for the next one, and this caller forever. Wrapped as PEP 479 wraps it.
        wrapped = RuntimeError(f"the call raised StopIteration: {error!r}")
        wrapped.__cause__ = error
        future.set_exception(wrapped)
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
