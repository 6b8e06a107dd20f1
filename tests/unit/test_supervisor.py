"""The supervisor of background loops: restarts after an error with a growing, capped backoff,
reports each worker, runs blocking workers in threads, and stop waits for every worker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from owlclaw.supervisor import Supervisor, WorkerStatus, backoff

T = TypeVar("T")
FAST = {"initial_backoff_s": 0.01, "max_backoff_s": 0.04}


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), 10))


def worker(supervisor: Supervisor, name: str) -> WorkerStatus:
    return next(w for w in supervisor.status() if w.name == name)


def test_backoff_doubles_from_the_initial_wait_up_to_the_cap() -> None:
    assert [backoff(n, 0.5, 4.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_a_failing_worker_is_restarted_and_its_last_error_reported() -> None:
    async def scenario() -> None:
        supervisor = Supervisor(**FAST)
        attempts = 0
        third = asyncio.Event()

        async def flaky(stop: asyncio.Event) -> None:
            nonlocal attempts
            attempts += 1
            if attempts < 3:
                raise RuntimeError(f"boom {attempts}")
            third.set()
            await stop.wait()

        supervisor.start("flaky", flaky)
        await third.wait()
        status = worker(supervisor, "flaky")
        assert (status.state, status.restarts) == ("running", 2)
        assert status.last_error == "RuntimeError: boom 2"
        assert status.last_error_at is not None and status.started_at is not None
        assert status.started_at > status.last_error_at
        await supervisor.stop()
        assert worker(supervisor, "flaky").state == "stopped"
        assert attempts == 3

    run(scenario)


def test_the_backoff_grows_with_consecutive_failures_and_is_capped() -> None:
    async def scenario() -> list[float]:
        supervisor = Supervisor(**FAST)
        waits: list[float] = []
        done = asyncio.Event()

        async def failing(stop: asyncio.Event) -> None:
            waits.append(worker(supervisor, "failing").backoff_s)
            if len(waits) == 6:
                done.set()
                await stop.wait()
                return
            raise OSError("database unreachable")

        supervisor.start("failing", failing)
        await done.wait()
        await supervisor.stop()
        return waits

    assert run(scenario) == [0.0, 0.01, 0.02, 0.04, 0.04, 0.04]


def test_a_failure_after_a_healthy_run_starts_again_from_the_initial_backoff() -> None:
    async def scenario() -> list[float]:
        supervisor = Supervisor(**FAST, healthy_s=0.0)  # every run counts as healthy
        waits: list[float] = []
        done = asyncio.Event()

        async def failing(stop: asyncio.Event) -> None:
            waits.append(worker(supervisor, "failing").backoff_s)
            if len(waits) == 4:
                done.set()
                await stop.wait()
                return
            raise OSError("database unreachable")

        supervisor.start("failing", failing)
        await done.wait()
        await supervisor.stop()
        return waits

    assert run(scenario) == [0.0, 0.01, 0.01, 0.01]


def test_a_worker_that_returns_without_being_stopped_is_restarted() -> None:
    async def scenario() -> None:
        supervisor = Supervisor(**FAST)
        second = asyncio.Event()
        calls = 0

        async def returns(stop: asyncio.Event) -> None:
            nonlocal calls
            calls += 1
            if calls == 2:
                second.set()
                await stop.wait()

        supervisor.start("returns", returns)
        await second.wait()
        status = worker(supervisor, "returns")
        assert status.restarts == 1
        assert status.last_error is not None and "returned without being stopped" in (
            status.last_error
        )
        await supervisor.stop()

    run(scenario)


def test_a_blocking_worker_runs_in_a_thread_and_is_restarted_there() -> None:
    async def scenario() -> list[str]:
        supervisor = Supervisor(**FAST)
        threads: list[str] = []
        running = threading.Event()

        def blocking(stop: threading.Event) -> None:
            threads.append(threading.current_thread().name)
            if len(threads) == 1:
                raise ConnectionError("LISTEN connection dropped")
            running.set()
            stop.wait()

        supervisor.start_thread("projection:runs", blocking)
        assert await asyncio.to_thread(running.wait, 5)
        status = worker(supervisor, "projection:runs")
        assert (status.state, status.restarts) == ("running", 1)
        assert status.last_error == "ConnectionError: LISTEN connection dropped"
        await supervisor.stop()
        assert worker(supervisor, "projection:runs").state == "stopped"
        return threads

    threads = run(scenario)
    assert threads == ["projection:runs", "projection:runs"]
    assert threading.main_thread().name not in threads


def test_stop_waits_for_every_worker_to_finish() -> None:
    async def scenario() -> list[str]:
        supervisor = Supervisor(**FAST)
        finished: list[str] = []
        started = asyncio.Event()
        thread_started = threading.Event()
        release = threading.Event()

        async def tidy(stop: asyncio.Event) -> None:
            started.set()
            await stop.wait()
            await asyncio.to_thread(release.wait, 5)  # shutting down takes a while
            finished.append("async")

        def blocking(stop: threading.Event) -> None:
            thread_started.set()
            stop.wait()
            release.wait(5)
            finished.append("thread")

        supervisor.start("tidy", tidy)
        supervisor.start_thread("blocking", blocking)
        await started.wait()
        assert await asyncio.to_thread(thread_started.wait, 5)
        stopping = asyncio.create_task(supervisor.stop())
        await asyncio.sleep(0)
        assert not stopping.done() and finished == []
        release.set()
        await stopping
        assert {w.state for w in supervisor.status()} == {"stopped"}
        return finished

    assert sorted(run(scenario)) == ["async", "thread"]


def test_a_worker_that_ignores_stop_is_reported_failed_after_the_bound() -> None:
    async def scenario() -> None:
        supervisor = Supervisor(**FAST)
        release = threading.Event()

        def stuck(stop: threading.Event) -> None:
            release.wait(5)

        supervisor.start_thread("stuck", stuck)
        await supervisor.stop(timeout_s=0.05)
        assert worker(supervisor, "stuck").state == "failed"
        release.set()

    run(scenario)


def test_two_workers_cannot_share_a_name() -> None:
    async def scenario() -> None:
        supervisor = Supervisor(**FAST)

        async def idle(stop: asyncio.Event) -> None:
            await stop.wait()

        supervisor.start("timer-worker", idle)
        with pytest.raises(ValueError, match="timer-worker"):
            supervisor.start("timer-worker", idle)
        await supervisor.stop()

    run(scenario)


def test_a_one_off_job_is_done_when_it_returns_and_restarted_when_it_fails() -> None:
    async def scenario() -> None:
        supervisor = Supervisor(**FAST)
        attempts = 0

        def job(stop: threading.Event) -> None:
            nonlocal attempts
            attempts += 1
            if attempts < 2:
                raise RuntimeError("database restarting")

        supervisor.start_thread("job", job, once=True)
        while worker(supervisor, "job").state != "done":
            await asyncio.sleep(0.01)
        status = worker(supervisor, "job")
        assert (status.restarts, status.last_error) == (1, "RuntimeError: database restarting")
        await supervisor.stop()
        assert worker(supervisor, "job").state == "done"
        assert attempts == 2

    run(scenario)
