"""The calls of one model response as a batch: calls that may run side by side (``parallel``)
do, at most ``limit`` at once, starting in call order; any other call is a barrier — the calls
before it finish first, the calls after it start after it. Results come back in call order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Job(Generic[T]):
    parallel: bool
    run: Callable[[], Awaitable[T]]


async def run_batch(jobs: Sequence[Job[T]], limit: int) -> list[T]:
    """Each job's result, in the jobs' order. A job that raises fails the batch with its
    exception (the others still running are cancelled), not an ExceptionGroup."""
    if limit < 1:
        raise ValueError(f"a batch needs a limit of at least 1, not {limit}")
    results: dict[int, T] = {}
    gate = asyncio.Semaphore(limit)

    async def side_by_side(i: int) -> None:
        async with gate:
            results[i] = await jobs[i].run()

    start = 0
    while start < len(jobs):
        if not jobs[start].parallel:
            results[start] = await jobs[start].run()
            start += 1
            continue
        end = start
        while end < len(jobs) and jobs[end].parallel:
            end += 1
        try:
            async with asyncio.TaskGroup() as group:
                for i in range(start, end):
                    group.create_task(side_by_side(i))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        start = end
    return [results[i] for i in range(len(jobs))]
