"""``owlclaw bench eval``: how fast recorded decisions are re-asked, i.e. what rebuilding each
decision's context from the ledger costs when the model itself costs nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from events import Ledger
from owlclaw.audit.decision_points import AgentRecord
from owlclaw.audit.evals import RunSelector, evaluate
from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime

SCRIPT = "bench-eval"


def _decide(reasoning: str) -> dict[str, Any]:
    arguments = {"reasoning": reasoning, "decision_type": "other"}
    return {"tool_calls": [{"name": "log_decision", "arguments": arguments}]}


STEPS: list[dict[str, Any]] = [_decide("checked"), _decide("nothing due"), {"content": "done"}]
METHOD = (
    "Records RUNS runs of one agent through AgentRuntime with a zero-latency scripted model "
    f"({len(STEPS)} decisions each: two log_decision calls, then an answer; not timed). "
    "Then, timed: "
    "(1) rebuilding every run's decision points from the ledger, one run after another "
    "(contexts_per_second); (2) `owlclaw eval` over all runs with the same scripted model as "
    "the candidate at the given concurrency: rebuild, ask through litellm, compare, and append "
    "one EvalRunCompared per run to the eval's stream (decisions_per_second)."
)


def _record(ledger: Ledger, agent_id: str, runs: int) -> float:
    runtime = AgentRuntime(ledger, agent_id, models=[f"scripted/{SCRIPT}"])

    async def record() -> None:
        for n in range(runs):
            await runtime.run("webhook", focus=f"case {n}")

    began = time.perf_counter()
    try:
        asyncio.run(record())
    finally:
        runtime.close()
    return time.perf_counter() - began


def run(url: str, runs: int = 1000, concurrency: int = 4) -> dict[str, Any]:
    register_script(SCRIPT, STEPS)
    litellm = litellm_with_offline_providers()
    agent_id = f"bench-eval-{uuid.uuid4().hex[:6]}"
    with Ledger(url) as ledger:
        record_s = _record(ledger, agent_id, runs)

        async def rebuild_all(record: AgentRecord) -> int:
            points = 0
            for n in range(1, runs + 1):
                points += len((await record.context(n)).points())
            return points

        began = time.perf_counter()
        points = asyncio.run(rebuild_all(AgentRecord(ledger, agent_id)))
        rebuild_s = time.perf_counter() - began

        began = time.perf_counter()
        report = asyncio.run(
            evaluate(
                litellm,
                AgentRecord(ledger, agent_id),
                f"scripted/{SCRIPT}",
                RunSelector(),
                concurrency=concurrency,
            )
        )
        eval_s = time.perf_counter() - began
    asked = sum(r.decisions for r in report.runs)
    return {
        "method": METHOD.replace("RUNS", str(runs)),
        "runs": runs,
        "concurrency": concurrency,
        "record_seconds": round(record_s, 2),
        "decision_points": points,
        "rebuild_seconds": round(rebuild_s, 3),
        "contexts_per_second": round(runs / rebuild_s, 1),
        "decisions_rebuilt_per_second": round(points / rebuild_s, 1),
        "eval_seconds": round(eval_s, 3),
        "decisions_asked": asked,
        "decisions_per_second": round(asked / eval_s, 1),
        "identical_runs": report.counts["identical"],
    }
