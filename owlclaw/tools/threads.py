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
    with contextlib.suppress(RuntimeError):
        future.get_loop().call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
