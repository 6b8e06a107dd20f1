"""The batch of one model response's calls (owlclaw.runtime.batch): parallel calls side by
side under the limit, barriers alone and in order, results in call order. Jobs yield to the
event loop a given number of times instead of sleeping, so nothing depends on wall-clock time."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.runtime.batch import Job, run_batch


class Trace:
    """What the jobs did: (start | end, index) in the order it happened, and the most jobs
    that ran at once."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []
        self.running: set[int] = set()
        self.most = 0
        self.overlaps: list[tuple[int, frozenset[int]]] = []
        """(job, the jobs running when it started or ended)."""

    def job(self, i: int, parallel: bool, turns: int) -> Job[int]:
        async def run() -> int:
            self.log.append(("start", i))
            self.running.add(i)
            self.most = max(self.most, len(self.running))
            self.overlaps.append((i, frozenset(self.running - {i})))
            for _ in range(turns):
                await asyncio.sleep(0)
                self.overlaps.append((i, frozenset(self.running - {i})))
            self.running.discard(i)
            self.log.append(("end", i))
            return i * 10

        return Job(parallel, run)


def test_results_come_back_in_call_order_whatever_order_the_calls_finish_in() -> None:
    trace = Trace()
    jobs = [trace.job(i, True, turns) for i, turns in enumerate([5, 3, 1, 0])]
    assert asyncio.run(run_batch(jobs, 4)) == [0, 10, 20, 30]
    assert [i for kind, i in trace.log if kind == "end"] == [3, 2, 1, 0]


def test_parallel_calls_start_in_call_order_and_run_side_by_side() -> None:
    trace = Trace()
    asyncio.run(run_batch([trace.job(i, True, 3) for i in range(3)], 4))
    assert trace.log[:3] == [("start", 0), ("start", 1), ("start", 2)]
    assert trace.most == 3


def test_no_more_calls_run_at_once_than_the_limit() -> None:
    trace = Trace()
    results = asyncio.run(run_batch([trace.job(i, True, 2) for i in range(7)], 2))
    assert results == [i * 10 for i in range(7)]
    assert trace.most == 2


def test_a_barrier_waits_for_the_calls_before_it_and_the_calls_after_it_wait_for_it() -> None:
    trace = Trace()
    jobs = [
        trace.job(0, True, 3),
        trace.job(1, True, 1),
        trace.job(2, False, 2),
        trace.job(3, True, 0),
        trace.job(4, True, 2),
    ]
    asyncio.run(run_batch(jobs, 4))
    at = {entry: n for n, entry in enumerate(trace.log)}
    assert at[("start", 2)] > max(at[("end", 0)], at[("end", 1)])
    assert min(at[("start", 3)], at[("start", 4)]) > at[("end", 2)]
    assert all(not others for i, others in trace.overlaps if i == 2)


def test_a_failing_call_fails_the_batch_with_its_own_exception() -> None:
    async def fails() -> int:
        raise LookupError("gone")

    trace = Trace()
    with pytest.raises(LookupError, match="gone"):
        asyncio.run(run_batch([trace.job(0, True, 1), Job(True, fails)], 4))


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(run_batch([], 0))


@settings(max_examples=150, deadline=None)
@given(
    calls=st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=12),
    limit=st.integers(1, 5),
)
def test_any_mix_of_parallel_calls_and_barriers(calls: list[tuple[bool, int]], limit: int) -> None:
    """Results in call order; each call runs once; no barrier overlaps another call; never
    more than the limit at once; a call never starts before an earlier barrier ended."""
    trace = Trace()
    jobs = [trace.job(i, parallel, turns) for i, (parallel, turns) in enumerate(calls)]
    assert asyncio.run(run_batch(jobs, limit)) == [i * 10 for i in range(len(calls))]
    assert sorted(i for kind, i in trace.log if kind == "start") == list(range(len(calls)))
    assert sorted(i for kind, i in trace.log if kind == "end") == list(range(len(calls)))
    barriers = {i for i, (parallel, _) in enumerate(calls) if not parallel}
    for i, others in trace.overlaps:
        assert not (i in barriers and others), f"barrier {i} overlapped {set(others)}"
    assert trace.most <= limit
    at = {entry: n for n, entry in enumerate(trace.log)}
    for b in barriers:
        assert all(at[("end", i)] < at[("start", b)] for i in range(b))
        assert all(at[("start", i)] > at[("end", b)] for i in range(b + 1, len(calls)))
