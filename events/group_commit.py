"""Group commit: requests that are ready at the same moment in one process share one commit.

One caller at a time leads: it takes every request queued so far (up to ``max_group``) and
commits them together; callers arriving meanwhile queue up and the first of them leads the next
group when this one is done. A lone caller commits at once, so grouping adds no latency; under
load, one round trip and one WAL flush serve a whole group.

The commit function returns one outcome per request (its result, or the exception that request
alone failed with); an exception raised by the commit itself fails every request of the group.
No caller returns before the commit that holds its request has returned.

Reads group the same way: the ledger's stream-head lookups share one query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")


class _Waiter(Generic[T, R]):
    __slots__ = ("done", "item", "lead", "outcome", "wake")

    def __init__(self, item: T):
        self.item = item
        self.wake = threading.Event()
        self.done = False
        self.lead = False
        self.outcome: R | BaseException | None = None


class GroupCommit(Generic[T, R]):
    """Batches concurrent ``submit`` calls into calls of ``commit`` (one at a time)."""

    def __init__(self, commit: Callable[[list[T]], Sequence[R | BaseException]], *, max_group: int):
        if max_group < 1:
            raise ValueError(f"max_group must be at least 1, not {max_group}")
        self._commit = commit
        self._max_group = max_group
        self._lock = threading.Lock()
        self._queue: list[_Waiter[T, R]] = []
        self._leading = False

    @property
    def waiting(self) -> int:
        """Requests queued for the next commit (not yet taken into one)."""
        with self._lock:
            return len(self._queue)

    def submit(self, item: T) -> R:
        """Commit ``item`` (with whatever else is ready) and return its result, or raise the
        exception its commit failed with."""
        waiter: _Waiter[T, R] = _Waiter(item)
        with self._lock:
            self._queue.append(waiter)
            waiter.lead = not self._leading
            self._leading = True
        try:
            while not waiter.done:
                if waiter.lead:
                    waiter.lead = False
                    self._lead()
                else:
                    waiter.wake.wait()
                    waiter.wake.clear()
        except BaseException:
            self._withdraw(waiter)
            raise
        if isinstance(waiter.outcome, BaseException):
            raise waiter.outcome
        return cast(R, waiter.outcome)

    def _lead(self) -> None:
        with self._lock:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
        try:
            outcomes: list[R | BaseException]
            try:
                outcomes = list(self._commit([w.item for w in group]))
                if len(outcomes) != len(group):
                    raise RuntimeError(f"commit gave {len(outcomes)} outcomes for {len(group)}")
            except BaseException as e:  # the transaction as a whole failed: so did each request
                outcomes = [e] * len(group)
            for waiter, outcome in zip(group, outcomes, strict=True):
                waiter.outcome = outcome
                waiter.done = True
                waiter.wake.set()
        finally:
            with self._lock:
                self._hand_over()

    def _withdraw(self, waiter: _Waiter[T, R]) -> None:
        """A caller interrupted while queued leaves the queue (and the lead, if it had it)."""
        with self._lock:
            if waiter in self._queue:
                self._queue.remove(waiter)
                if waiter.lead:
                    self._hand_over()

    def _hand_over(self) -> None:
        """With the lock held: the first queued caller leads next, or nobody leads."""
        if self._queue:
            successor = self._queue[0]
            successor.lead = True
            successor.wake.set()
        else:
            self._leading = False
