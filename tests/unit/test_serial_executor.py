"""A serial executor on a shared pool: each agent's calls run one at a time, in order."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.runtime.serial import SerialExecutor
from tests.waiting import wait_for


class Lane:
    """Records the calls of one serial executor and whether two of them ever overlapped."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.running = 0
        self.overlapped = False
        self._lock = threading.Lock()

    def call(self, n: int, pause_s: float) -> int:
        with self._lock:
            self.running += 1
            self.overlapped |= self.running > 1
        time.sleep(pause_s)
        with self._lock:
            self.running -= 1
            self.ran.append(n)
        return n


@settings(max_examples=25, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.0, 0.0005])), min_size=1, max_size=60
    ),
    workers=st.integers(1, 4),
)
def test_each_executor_runs_its_calls_in_submission_order_never_two_at_once(
    calls: list[tuple[int, float]], workers: int
) -> None:
    with ThreadPoolExecutor(workers) as pool:
        serials = [SerialExecutor(pool) for _ in range(4)]
        lanes = [Lane() for _ in range(4)]
        submitted: list[list[int]] = [[] for _ in range(4)]
        futures = []
        for n, (lane, pause_s) in enumerate(calls):
            submitted[lane].append(n)
            futures.append(serials[lane].submit(lanes[lane].call, n, pause_s))
        assert [f.result(timeout=10) for f in futures] == list(range(len(calls)))
    for lane, expected in zip(lanes, submitted, strict=True):
        assert lane.ran == expected
        assert not lane.overlapped


def test_many_executors_share_a_few_threads_and_all_finish() -> None:
    """1,000 agents' calls on four threads: nobody waits for a thread of its own."""
    with ThreadPoolExecutor(4) as pool:
        serials = [SerialExecutor(pool) for _ in range(1000)]
        futures = [s.submit(lambda i=i: i * 2) for i, s in enumerate(serials) for _ in "abc"]
        doubled = [i * 2 for i in range(1000) for _ in "abc"]
        assert [f.result(timeout=10) for f in futures] == doubled


def test_a_failing_call_fails_only_its_own_future_and_the_next_one_runs() -> None:
    def fails() -> None:
        raise ValueError("the database refused")

    with ThreadPoolExecutor(2) as pool:
        serial = SerialExecutor(pool)
        failed, after = serial.submit(fails), serial.submit(lambda: "next")
        with pytest.raises(ValueError, match="the database refused"):
            failed.result(timeout=10)
        assert after.result(timeout=10) == "next"


def test_shutdown_waits_for_what_was_submitted_and_refuses_more() -> None:
    with ThreadPoolExecutor(2) as pool:
        serial, lane = SerialExecutor(pool), Lane()
        futures = [serial.submit(lane.call, n, 0.01) for n in range(5)]
        serial.shutdown(wait=True)
        assert lane.ran == [0, 1, 2, 3, 4]
        assert all(f.done() for f in futures)
        with pytest.raises(RuntimeError, match="after shutdown"):
            serial.submit(lane.call, 5, 0.0)
        assert pool.submit(lambda: "the pool is its owner's").result(timeout=10)


def test_shutdown_with_cancel_futures_cancels_what_has_not_started() -> None:
    """The first call runs until the rest are cancelled (not for a fixed while): the order of
    events is the test's, whatever the speed of the machine."""
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        serial = SerialExecutor(pool)
        first = serial.submit(release.wait, 60)
        wait_for(first.running, "the first call to start")
        rest = [serial.submit(lambda: "never") for _ in range(3)]

        def release_once_cancelled() -> None:
            deadline = time.monotonic() + 30  # if they never are, the first call returns anyway
            while not all(f.cancelled() for f in rest) and time.monotonic() < deadline:
                time.sleep(0.005)
            release.set()

        threading.Thread(target=release_once_cancelled).start()
        serial.shutdown(wait=True, cancel_futures=True)
        assert first.result(timeout=10) is True
        assert all(f.cancelled() for f in rest)


def test_a_shut_pool_refuses_the_call_and_leaves_the_executor_usable_for_shutdown() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    serial = SerialExecutor(pool)
    with pytest.raises(RuntimeError):
        serial.submit(lambda: "lost")
    serial.shutdown(wait=True)  # returns: the refused call left nothing running


def test_asyncio_awaits_calls_through_run_in_executor_in_order() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(2) as pool:
            serial, lane = SerialExecutor(pool), Lane()
            pending = [loop.run_in_executor(serial, lane.call, n, 0.001) for n in range(10)]
            await asyncio.gather(*pending)
            return lane.ran

    assert asyncio.run(main()) == list(range(10))


def test_call_gives_each_outcome_on_the_loop_in_submission_order() -> None:
    def fails() -> None:
        raise ValueError("the database refused")

    async def main() -> tuple[list[int], list[int]]:
        with ThreadPoolExecutor(2) as pool:
            serial, lane = SerialExecutor(pool), Lane()
            pending = [serial.call(lane.call, n, 0.001) for n in range(10)]
            failed = serial.call(fails)
            after = serial.call(lane.call, 10, 0.0)
            results = await asyncio.gather(*pending)
            with pytest.raises(ValueError, match="the database refused"):
                await failed
            assert await after == 10
            return list(results), lane.ran

    results, ran = asyncio.run(main())
    assert results == list(range(10))
    assert ran == list(range(11))


def test_a_call_cancelled_before_its_turn_does_not_run() -> None:
    release = threading.Event()

    async def main() -> Lane:
        with ThreadPoolExecutor(1) as pool:
            serial, lane = SerialExecutor(pool), Lane()
            first = serial.call(release.wait, 60)
            cancelled = serial.call(lane.call, 1, 0.0)
            cancelled.cancel()
            release.set()
            assert await first is True
            assert await serial.call(lane.call, 2, 0.0) == 2
            assert cancelled.cancelled()
            return lane

    assert asyncio.run(main()).ran == [2]
