"""``owlclaw bench batch``: one model response carrying several calls, on PostgreSQL.

Five independent calls of a ``parallel_safe`` capability that sleeps 200 ms: the tools' wall time
(first call started to last call finished, from the recorded outcomes and their durations) with
the run's limit at 5, at the default 4 and at 1 (every call in turn). Then the loop's overhead
per call, with instant calls: the gap between the model's response and its next request divided
by the calls of the response, for five calls in one response against one call alone.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from itertools import pairwise
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.bench import percentiles
from owlclaw.config import RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry

CALLS = 5
SLEEP_S = 0.2
OUTCOMES = ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut


def _registry() -> Registry:
    registry = Registry()

    @registry.capability("Wait on a slow, independent lookup.", parallel_safe=True)
    async def slow(n: int) -> int:
        await asyncio.sleep(SLEEP_S)
        return n

    @registry.capability("An instant, independent lookup.", parallel_safe=True)
    async def instant(n: int) -> int:
        return n

    return registry


def _script(name: str, tool: str, calls: int, steps: int) -> str:
    response = {"tool_calls": [{"name": tool, "arguments": {"n": i}} for i in range(calls)]}
    register_script(name, [*([response] * steps), {"content": "done"}])
    return f"scripted/{name}"


def _runs(ledger: Ledger, model: str, limit: int, runs: int) -> list[list[ev.LedgerEvent]]:
    runtime = AgentRuntime(
        ledger,
        f"bench-{uuid.uuid4().hex[:6]}",
        models=[model],
        registry=_registry(),
        limits=RuntimeConfig(parallel_tool_calls=limit, max_identical_calls=100),
    )
    asyncio.run(runtime.run("webhook"))  # warm up: imports, prepared SQL
    results = [asyncio.run(runtime.run("webhook", focus="bench")) for _ in range(runs)]
    runtime.close()
    assert all(r.status == "completed" for r in results), [r.status for r in results]
    return [ledger.stream(uuid.UUID(r.run_id)) for r in results]


def _tools_wall_ms(events: list[ev.LedgerEvent]) -> float:
    """First call started to last call finished (each outcome's time minus its duration)."""
    outcomes = [e for e in events if isinstance(e, OUTCOMES)]
    ends = [e.timestamp for e in outcomes]
    starts = [e.timestamp - timedelta(milliseconds=e.duration_ms) for e in outcomes]
    return (max(ends) - min(starts)).total_seconds() * 1000


def _overhead_per_call_ms(events: list[ev.LedgerEvent], calls: int) -> list[float]:
    """Each step's gap between the model's response and its next request, per call."""
    responses = [e for e in events if isinstance(e, ev.LLMResponded)]
    gaps = []
    for done, following in pairwise(responses):
        next_request = following.timestamp - timedelta(milliseconds=following.latency_ms)
        gaps.append((next_request - done.timestamp).total_seconds() * 1000 / calls)
    return gaps


def run(url: str, runs: int = 20, encrypt: bool = True) -> dict[str, Any]:
    wall: dict[str, Any] = {}
    with Ledger(url, encrypt=encrypt) as ledger:
        slow = _script("bench-batch-slow", "slow", CALLS, 1)
        for limit in (CALLS, RuntimeConfig().parallel_tool_calls, 1):
            samples = [_tools_wall_ms(events) for events in _runs(ledger, slow, limit, runs)]
            wall[f"parallel_tool_calls={limit}"] = percentiles(samples)
        steps = 5
        batched = _script("bench-batch-instant", "instant", CALLS, steps)
        single = _script("bench-batch-single", "instant", 1, steps)
        batch_ms = [
            gap
            for events in _runs(ledger, batched, CALLS, runs)
            for gap in _overhead_per_call_ms(events, CALLS)
        ]
        single_ms = [
            gap
            for events in _runs(ledger, single, CALLS, runs)
            for gap in _overhead_per_call_ms(events, 1)
        ]
    return {
        "encrypt": encrypt,
        "runs": runs,
        "calls_per_response": CALLS,
        "call_sleep_ms": SLEEP_S * 1000,
        "tools_wall_time": wall,
        "overhead_per_call_in_a_batch_of_5": percentiles(batch_ms),
        "overhead_per_call_alone": percentiles(single_ms),
    }
