"""``owlclaw bench runtime --openai``: OwlClaw's durable tool step against a bare litellm loop,
both through litellm's real OpenAI client to one loopback OpenAI-compatible server.

The server (``openai_server``, a process of its own) plays a model that calls log_decision
``TOOL_STEPS`` times, then answers. OwlClaw's runs are durable (the real ledger on PostgreSQL);
the bare loop sends the same system and user messages and the same tools, and answers each
call with the result OwlClaw gave, keeping nothing. Runs of the two alternate in one event loop,
so that drift in the machine's load falls on both alike.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import urllib.request
import uuid
from itertools import pairwise
from typing import Any

import msgspec

from events import Ledger
from events import catalog as ev
from owlclaw.bench import percentiles
from owlclaw.bench.openai_server import Conversation, serving
from owlclaw.config import RuntimeConfig
from owlclaw.environ import overlaid
from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.runtime.agent_runtime import AgentRuntime

TOOL_STEPS = 10
MODEL = "openai/gpt-4o-mini"
"""A model litellm knows (its cost is looked up as for a real one); the server ignores it."""
WARM_UP_RUNS = 6
"""Enough for the agent's recent-activity context (5 runs) to reach its steady size."""
METHOD = (
    "A loopback OpenAI-compatible server in its own process answers {steps} log_decision tool "
    "calls, then a final message. Per run, a step is the gap between two chat-completion "
    "requests arriving at the server (its clock): the client's handling of one response, the "
    "tool, the commit and the next request's sending, plus the server's answer. OwlClaw: "
    "AgentRuntime.run with model {model} through litellm's OpenAI client, durable in "
    "PostgreSQL. Bare: a litellm.acompletion loop with the same system and user messages, the "
    "same tools and the same tool results, nothing kept. {runs} runs of each, alternating, in "
    "one event loop, after {warm_up} OwlClaw warm-up runs. acompletion: the time inside "
    "litellm.acompletion (OwlClaw's from its LLMResponded latency)."
)


def run(url: str, runs: int = 60) -> dict[str, Any]:
    """Both loops' per-step percentiles and their difference, with the method."""
    with (
        serving(TOOL_STEPS) as base,
        overlaid({"OPENAI_BASE_URL": base, "OPENAI_API_KEY": "sk-bench"}),  # litellm's client
        Ledger(url) as ledger,
    ):
        litellm = litellm_with_offline_providers()
        runtime = AgentRuntime(ledger, f"bench-openai-{uuid.uuid4().hex[:6]}", models=[MODEL])
        try:
            owlclaw_runs, bare_ms = asyncio.run(_measure(runtime, litellm, base, runs))
        finally:
            runtime.close()
        seen = _conversations(base)
        owlclaw_acompletion = [
            e.latency_ms
            for run_id in owlclaw_runs
            for e in ledger.stream(run_id)
            if isinstance(e, ev.LLMResponded)
        ]
    owlclaw = _steps(seen, "owlclaw-run")
    bare = _steps(seen, "bare-run")
    return {
        "method": METHOD.format(steps=TOOL_STEPS, model=MODEL, runs=runs, warm_up=WARM_UP_RUNS),
        "runs": runs,
        "tool_steps_per_run": TOOL_STEPS,
        "owlclaw_step": percentiles(owlclaw),
        "bare_litellm_step": percentiles(bare),
        "owlclaw_added_per_step_ms": {
            "p50": round(statistics.median(owlclaw) - statistics.median(bare), 3),
            "p95": round(_p95(owlclaw) - _p95(bare), 3),
        },
        "owlclaw_acompletion": percentiles(owlclaw_acompletion),
        "bare_acompletion": percentiles(bare_ms),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "targets": {"owlclaw_added_per_step_p50_ms_max": 1.5},
    }


async def _measure(
    runtime: AgentRuntime, litellm: Any, base: str, runs: int
) -> tuple[list[uuid.UUID], list[float]]:
    """Warm up, take OwlClaw's messages and tools as the server saw them, then alternate one
    OwlClaw run and one bare run; the OwlClaw run ids and the bare acompletion times."""
    for i in range(WARM_UP_RUNS):
        await runtime.run("webhook", focus=f"warm-up {i}")
    seen = _conversations(base)
    last = f"warm-up {WARM_UP_RUNS - 1}"
    template = next(c.last_request for key, c in seen.items() if key.endswith(last))
    messages = template["messages"]
    system, user = messages[0], messages[1]
    told = next(m["content"] for m in messages if m["role"] == "tool")
    timeout_s = RuntimeConfig().llm_timeout_s
    run_ids: list[uuid.UUID] = []
    acompletion_ms: list[float] = []
    for i in range(runs):
        result = await runtime.run("webhook", focus=f"owlclaw-run {i}")
        run_ids.append(uuid.UUID(result.run_id))
        first = [system, {**user, "content": user["content"].replace(last, f"bare-run {i}")}]
        acompletion_ms += await _bare_run(litellm, first, template["tools"], told, timeout_s)
    return run_ids, acompletion_ms


async def _bare_run(
    litellm: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    told: str,
    timeout_s: float,
) -> list[float]:
    """The loop without OwlClaw: ask, answer each tool call with ``told``, until the model
    answers; the time of each acompletion."""
    messages = list(messages)
    times = []
    while True:
        began = time.perf_counter()
        response = await litellm.acompletion(
            model=MODEL, messages=messages, tools=tools, timeout=timeout_s
        )
        times.append((time.perf_counter() - began) * 1000)
        message = response.choices[0].message
        if not message.tool_calls:
            return times
        messages.append(message.model_dump(exclude_none=True))
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": told} for c in message.tool_calls
        ]


def _conversations(base: str) -> dict[str, Conversation]:
    with urllib.request.urlopen(base.removesuffix("/v1") + "/bench/conversations") as response:
        return msgspec.json.decode(response.read(), type=dict[str, Conversation])


def _steps(seen: dict[str, Conversation], tag: str) -> list[float]:
    """The gaps between consecutive requests of the conversations whose key holds ``tag``."""
    return [
        later - earlier
        for key, conversation in seen.items()
        if tag in key
        for earlier, later in pairwise(conversation.arrivals)
    ]


def _p95(samples: list[float]) -> float:
    return float(percentiles(samples)["p95_ms"])
