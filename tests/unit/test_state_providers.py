"""State providers: a cached value is served within its TTL and read again after it (on an
injected clock), and a provider that does not answer in time is a STATE_TIMEOUT the model is told
of, not the call's generic TIMEOUT."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.states import StateProvider, States, StateTimedOut
from owlclaw.tools.threads import HandlerThreads
from tests.scripted import call, play, run_events


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_cached_value_is_served_within_its_ttl_and_read_again_after_it() -> None:
    clock = Clock()
    states = States(clock)
    reads: list[float] = []

    def price() -> float:
        reads.append(clock.now)
        return 100.0 + len(reads)

    states["price"] = StateProvider(price, ttl_seconds=5)

    async def scenario() -> list[float]:
        threads = HandlerThreads()
        values = [await states.read_state("price", threads)]
        clock.now += 4.9
        values.append(await states.read_state("price", threads))
        clock.now += 0.1  # 5 s after the read: the TTL is over
        values.append(await states.read_state("price", threads))
        return values

    assert asyncio.run(scenario()) == [101.0, 101.0, 102.0]
    assert reads == [1000.0, 1005.0]


def test_without_a_ttl_every_query_reads_the_provider() -> None:
    states = States(Clock())
    reads: list[int] = []

    async def count() -> int:
        reads.append(1)
        return len(reads)

    states["count"] = StateProvider(count)

    async def scenario() -> list[int]:
        return [await states.read_state("count", HandlerThreads()) for _ in range(3)]

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_a_provider_that_never_answers_is_a_state_timeout_within_its_limit() -> None:
    async def scenario() -> None:
        never = asyncio.Event()
        states = States()

        async def stuck() -> int:
            await never.wait()
            return 1

        states["stuck"] = StateProvider(stuck, timeout_s=0.05)
        with pytest.raises(StateTimedOut, match=r"'stuck' did not answer within 0\.05 s"):
            await states.read_state("stuck", HandlerThreads())
        with pytest.raises(StateTimedOut, match=r"within 0\.01 s"):  # the runtime's shorter limit
            await states.read_state("stuck", HandlerThreads(), limit_s=0.01)

    asyncio.run(scenario())


@pytest.mark.parametrize("bad", [{"timeout_s": 0}, {"timeout_s": 301}, {"ttl_seconds": -1}])
def test_a_provider_with_an_impossible_limit_is_refused_at_registration(
    bad: dict[str, float],
) -> None:
    with pytest.raises(ValueError, match="a state's"):
        Registry().state("x", **bad)(lambda: 1)


def test_the_model_is_told_state_timeout_when_a_provider_hangs(ledger: Ledger) -> None:
    """Neither provider ever answers on its own (one awaits an event never set, the other blocks
    its thread until the test ends): only their limit ends the calls, however slow the machine.
    ``quotes`` sets no limit, so the runtime's tool limit bounds it: the same deadline as the
    call's own, which used to win as the generic TIMEOUT."""
    registry = Registry()
    release = threading.Event()
    started: list[str] = []

    @registry.state("quotes")
    async def quotes() -> Any:
        started.append("quotes")
        await asyncio.Event().wait()

    @registry.state("ledger_balance", timeout_s=0.2)
    def ledger_balance() -> Any:
        release.wait(60)

    runtime = AgentRuntime(
        ledger,
        f"a{uuid.uuid4().hex[:8]}",
        models=["x"],
        registry=registry,
        limits=RuntimeConfig(tool_timeout_s=0.2),
    )
    steps = [
        {"tool_calls": [call("query_state", state_name="quotes")]},
        {"tool_calls": [call("query_state", state_name="ledger_balance")]},
        {"content": "went on without them"},
    ]
    try:
        result = play(runtime, steps)
    finally:
        release.set()
    events = run_events(ledger, result)
    failed = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert [(e.error_code, e.retryable, e.error) for e in failed] == [
        ("STATE_TIMEOUT", True, "state provider 'quotes' did not answer within 0.2 s"),
        ("STATE_TIMEOUT", True, "state provider 'ledger_balance' did not answer within 0.2 s"),
    ]
    assert not [e for e in events if isinstance(e, ev.ToolCallTimedOut)]
    assert started == ["quotes"]  # a timed-out read is the model's to repeat, not retried here
    assert result.status == "completed"
