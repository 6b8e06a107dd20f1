"""Slow loads (a model, a large import) run beside the work that does not need them.

Each load runs in a daemon thread of its own, not in asyncio's default executor: that executor
is joined when its event loop closes and when the interpreter exits, so a server stopped right
after its start waited for a load nobody needed any more (17.7 s instead of 1.4 s). The result
is a ``concurrent.futures.Future``, set from the loading thread (thread-safe): a caller waits
for it where it needs it (``await asyncio.wrap_future(f)`` on a loop, ``f.result()`` in a
thread), and a loop that closed first is neither waited for nor told.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def load_in_background(load: Callable[[], T], name: str = "background-load") -> Future[T]:
    """``load()`` started in a new daemon thread named ``name``; its result or error."""
    future: Future[T] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = load()
        except BaseException as e:  # handed to whoever waits, as the load's own error
            future.set_exception(e)
        else:
            future.set_result(result)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future
