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

        def settle(result: Any, error: BaseException | None) -> None:
            if done.cancelled():
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)

        def work() -> None:
            try:
                result, error = fn(**kwargs), None
            except BaseException as e:  # handed to the awaiting task, not lost in the thread
                result, error = None, e
            finally:
                self._slots.release()
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for it
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=work, name=self._name, daemon=True).start()
        return await done
