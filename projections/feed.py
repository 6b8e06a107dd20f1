"""Subscriptions for analytics jobs: follow the raw log, or what a projection has absorbed.

Both are iterators that block while there is nothing new, woken by LISTEN/NOTIFY, and resume
from the last position the consumer saw (pass it back as ``after``). ``afollow_log`` is the
async version of ``follow_log``; ``follow_log_until`` is the one a supervised worker uses (it
ends when told to stop); ``afollow_run`` follows one run's stream until it ends.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Generator, Sequence
from dataclasses import dataclass

from events.catalog import TERMINAL_RUN_EVENTS, LedgerEvent, RunParked
from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from projections.locks import channel
from projections.view import View

IDLE_WAKE_SECONDS = 1.0
HELD_BACK_POLL_SECONDS = 0.005
BATCH_SIZE = 1000


@dataclass(frozen=True)
class LogBatch:
    events: list[LoggedEvent]
    position: int
    """The log position the batch reaches: every wanted event up to it is in ``events``."""


def follow_log(ledger: Ledger, after: int = 0) -> Generator[LoggedEvent]:
    """Every ledger event after ``after``, in log order, forever (close it to stop)."""
    yield from ledger.log.subscribe(after=after)


def follow_log_until(
    ledger: Ledger,
    stop: threading.Event,
    after: int = 0,
    types: Sequence[type[LedgerEvent]] = (),
) -> Generator[LogBatch]:
    """The log after ``after`` in batches (only events of ``types`` if given, filtered in the
    database), until ``stop`` is set: checked after each batch and at least every second while
    the log is idle, so a supervised worker stops promptly. Each batch says the position it
    reaches, also when none of its events were wanted."""
    with ledger.database.listen() as conn:
        last = after
        while not stop.is_set():
            head = ledger.log.head()
            if head > last:
                batch = ledger.log.read(after=last, limit=BATCH_SIZE, up_to=head, types=types)
                last = batch[-1].position if len(batch) == BATCH_SIZE else head
                yield LogBatch(batch, last)
                continue
            wait = HELD_BACK_POLL_SECONDS if ledger.log.is_held_back(last) else IDLE_WAKE_SECONDS
            for _ in conn.notifies(timeout=wait, stop_after=1):
                pass


def follow_projection(ledger: Ledger, view: View, after: int = 0) -> Generator[LoggedEvent]:
    """The events ``view`` reads, each yielded once the view has absorbed it.

    Reading the view's tables after receiving position P therefore shows at least P.
    """
    last = after
    with ledger.database.listen(channel(view.name)) as conn:
        while True:
            absorbed = view.max_tracking_id(view.tracking_name) or 0
            while last < absorbed:
                batch = ledger.log.read(after=last, up_to=absorbed, types=view.events)
                yield from batch
                last = batch[-1].position if len(batch) == 1000 else absorbed
            for _ in conn.notifies(timeout=IDLE_WAKE_SECONDS, stop_after=1):
                pass


async def _aiterate(iterator: Generator[LoggedEvent]) -> AsyncIterator[LoggedEvent]:
    """Each blocking ``next`` runs in a worker thread; closing stops the subscription."""
    sentinel = object()
    try:
        while True:
            item = await asyncio.to_thread(next, iterator, sentinel)
            if item is sentinel:
                return
            assert isinstance(item, LoggedEvent)
            yield item
    finally:
        iterator.close()


async def afollow_run(
    ledger: Ledger,
    run_id: str,
    *,
    poll_s: float = 0.05,
    timeout_s: float = 600.0,
    until_parked: bool = False,
) -> AsyncIterator[LedgerEvent]:
    """One run's events as they are committed, until its end event (TimeoutError after
    ``timeout_s``), or with ``until_parked`` until it waits for an approval. It reads the run's
    own stream, so it is cheap whatever the log's size."""
    stream, seen = uuid.UUID(run_id), 0
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        events = await asyncio.to_thread(ledger.stream, stream)
        for event in events[seen:]:
            yield event
            if isinstance(event, TERMINAL_RUN_EVENTS):
                return
        seen = len(events)
        if until_parked and events and isinstance(events[-1], RunParked):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"run {run_id} did not end within {timeout_s:g} s")
        await asyncio.sleep(poll_s)


def afollow_log(ledger: Ledger, after: int = 0) -> AsyncIterator[LoggedEvent]:
    """``follow_log`` for asyncio consumers."""
    return _aiterate(follow_log(ledger, after))
