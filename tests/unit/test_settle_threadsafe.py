"""Outcomes that worker threads hand to an event loop: each reaches its own future, and those
that arrive while the loop is busy share one wake of it."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.tools.threads import settle_threadsafe


def _settle_from_threads(futures: list[asyncio.Future[Any]], threads: int) -> None:
    """Settle ``futures`` from ``threads`` threads at once (every odd one with an error), and
    return once all have handed their outcomes over."""

    def work(part: list[tuple[int, asyncio.Future[Any]]]) -> None:
        for n, future in part:
            error = ValueError(f"call {n} failed") if n % 2 else None
            settle_threadsafe(future, None if error else n, error)

    numbered = list(enumerate(futures))
    workers = [threading.Thread(target=work, args=(numbered[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


@settings(max_examples=25, deadline=None)
@given(calls=st.integers(1, 300), threads=st.integers(1, 6))
def test_every_outcome_reaches_its_own_future(calls: int, threads: int) -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(calls)]
        await asyncio.to_thread(_settle_from_threads, futures, threads)
        return await asyncio.gather(*futures, return_exceptions=True)

    outcomes = asyncio.run(main())
    for n, outcome in enumerate(outcomes):
        if n % 2:
            assert isinstance(outcome, ValueError)
            assert str(outcome) == f"call {n} failed"
        else:
            assert outcome == n


def test_outcomes_that_arrive_while_the_loop_is_busy_wake_it_once() -> None:
    async def main() -> tuple[int, list[Any]]:
        loop = asyncio.get_running_loop()
        wakes = 0
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return call_soon_threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        futures = [loop.create_future() for _ in range(200)]
        _settle_from_threads(futures, 4)  # the loop is blocked until all are handed over
        return wakes, await asyncio.gather(*futures, return_exceptions=True)

    wakes, outcomes = asyncio.run(main())
    assert wakes == 1
    assert [o for o in outcomes if not isinstance(o, Exception)] == list(range(0, 200, 2))


def test_an_outcome_after_the_last_batch_wakes_the_loop_again() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        results = []
        for n in range(5):
            future: asyncio.Future[int] = loop.create_future()
            threading.Thread(target=settle_threadsafe, args=(future, n, None)).start()
            results.append(await asyncio.wait_for(future, timeout=30))
        return results

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]


def test_a_future_its_caller_gave_up_on_is_left_alone() -> None:
    async def main() -> tuple[bool, int]:
        loop = asyncio.get_running_loop()
        abandoned: asyncio.Future[int] = loop.create_future()
        abandoned.cancel()
        awaited: asyncio.Future[int] = loop.create_future()
        _settle_from_threads([abandoned], 1)
        settle_threadsafe(awaited, 7, None)
        return abandoned.cancelled(), await awaited

    assert asyncio.run(main()) == (True, 7)


def test_a_call_that_raised_stop_iteration_fails_its_caller_and_no_one_else() -> None:
    """asyncio refuses StopIteration on a future: it reaches the caller wrapped, and the
    outcomes handed over with it still settle."""

    async def main() -> tuple[BaseException | None, list[int]]:
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future[int] = loop.create_future()
        others = [loop.create_future() for _ in range(3)]

        def hand_over() -> None:
            settle_threadsafe(others[0], 0, None)
            settle_threadsafe(stopped, None, StopIteration("exhausted"))
            settle_threadsafe(others[1], 1, None)
            settle_threadsafe(others[2], 2, None)

        hand_over()  # the loop is blocked meanwhile: the four share one batch
        results = await asyncio.wait_for(asyncio.gather(*others), timeout=30)
        return stopped.exception(), results

    error, results = asyncio.run(main())
    assert isinstance(error, RuntimeError)
    assert isinstance(error.__cause__, StopIteration)
    assert results == [0, 1, 2]


def test_outcomes_for_a_closed_loop_are_dropped_and_keep_nothing_alive() -> None:
    """One handed over before the loop closed without running again, one after."""
    loop = asyncio.new_event_loop()
    before: asyncio.Future[int] = loop.create_future()
    after: asyncio.Future[int] = loop.create_future()
    settle_threadsafe(before, 1, None)
    loop.close()
    settle_threadsafe(after, 2, None)
    assert not before.done()
    assert not after.done()
    gone = weakref.ref(loop)
    del loop, before, after
    gc.collect()
    assert gone() is None
