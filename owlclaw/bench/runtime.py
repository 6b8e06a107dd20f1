"""``owlclaw bench runtime``: overhead of the decision loop around the model, from the ledger.

Runs of one agent play a scripted model at zero latency, each making ``TOOL_STEPS`` log_decision
calls (durable appends to PostgreSQL). Figures come from the recorded events: each LLMResponded
carries its time in ``acompletion``, so a tool step's overhead is the gap between one model call
ending and the next one starting. The provider's own time is measured by calling it directly,
so litellm's share of a call is the difference.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import timedelta
from itertools import pairwise
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.bench import percentiles
from owlclaw.llm.scripted import make_handler, register_script
from owlclaw.runtime.agent_runtime import AgentRuntime

TOOL_STEPS = 10
SCRIPT = "bench-runtime"


def _script() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "log_decision",
                    "arguments": {"reasoning": f"step {i}", "decision_type": "other"},
                }
            ]
        }
        for i in range(TOOL_STEPS)
    ]
    return [*steps, {"content": "done"}]


async def _provider_ms(samples: int) -> list[float]:
    """Time spent inside the scripted provider itself, called without litellm."""
    import litellm

    handler = make_handler()
    messages = [{"role": "user", "content": "go"}]
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        await handler.acompletion(
            model=f"scripted/{SCRIPT}", messages=messages, model_response=litellm.ModelResponse()
        )
        times.append((time.perf_counter() - began) * 1000)
    return times


def run(url: str, runs: int = 60, encrypt: bool = True) -> dict[str, Any]:
    register_script(SCRIPT, _script())
    with Ledger(url, encrypt=encrypt) as ledger:
        runtime = AgentRuntime(
            ledger, f"bench-{uuid.uuid4().hex[:6]}", models=[f"scripted/{SCRIPT}"]
        )
        asyncio.run(runtime.run("webhook"))  # warm up: litellm import paths, prepared SQL
        starts: list[tuple[float, str]] = []
        began = time.perf_counter()
        for _ in range(runs):
            wall = time.time()
            result = asyncio.run(runtime.run("webhook", focus="bench"))
            starts.append((wall, result.run_id))
        elapsed = time.perf_counter() - began
        runtime.close()
        step_ms, start_ms, acompletion_ms, commits = [], [], [], []
        for wall, run_id in starts:
            events = ledger.stream(uuid.UUID(run_id))
            responses = [e for e in events if isinstance(e, ev.LLMResponded)]
            acompletion_ms += [r.latency_ms for r in responses]
            first_request = responses[0].timestamp - timedelta(milliseconds=responses[0].latency_ms)
            start_ms.append((first_request.timestamp() - wall) * 1000)
            for done, following in pairwise(responses):
                next_request = following.timestamp - timedelta(milliseconds=following.latency_ms)
                step_ms.append((next_request - done.timestamp).total_seconds() * 1000)
            # minus the final one
            commits.append(ledger.database.stream_commits(uuid.UUID(run_id)) - 1)
    provider = asyncio.run(_provider_ms(200))
    litellm_ms = statistics.median(acompletion_ms) - statistics.median(provider)
    return {
        "encrypt": encrypt,
        "runs": runs,
        "tool_steps_per_run": TOOL_STEPS,
        "tool_step_overhead": percentiles(step_ms),
        "commits_per_tool_step": round(sum(commits) / (runs * TOOL_STEPS), 3),
        "run_start_latency": percentiles(start_ms),
        "tool_calls_per_second_one_agent": round(runs * TOOL_STEPS / elapsed, 1),
        "acompletion": percentiles(acompletion_ms),
        "provider_itself": percentiles(provider),
        "litellm_added_per_call_ms_p50": round(litellm_ms, 3),
        "targets": {
            "tool_step_p95_ms_max": 5,
            "commits_per_tool_step_max": 1.0,
            "run_start_p95_ms_max": 20,
            "tool_calls_per_second_min": 100,
        },
    }
