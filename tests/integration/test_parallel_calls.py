"""A model response's calls as a batch on the PostgreSQL ledger: every request committed in one
append before the first call runs, outcomes committed as they finish, and a run resumed after
its process stopped in the middle of a batch repeats nothing that finished."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
import pytest

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw import ToolContext
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from owlclaw.tools.capabilities import Registry

pytestmark = pytest.mark.integration

WAIT_S = 20.0


class Capturing:
    """The in-process litellm, noting the tool results the model was last told."""

    def __init__(self) -> None:
        self.inner = LiteLLM()
        self.told: list[dict[str, Any]] = []

    async def complete(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], t: float
    ) -> Answer:
        self.told = [m for m in messages if m.get("role") == "tool"]
        return await self.inner.complete(model, messages, tools, t)


def positions(ledger: Ledger, agent_id: str, run_id: uuid.UUID) -> dict[int, int]:
    """The run's event versions -> their log positions."""
    return {
        logged.event.originator_version: logged.position
        for logged in ledger.agent_history(agent_id)
        if logged.event.originator_id == run_id
    }


def test_a_batchs_requests_are_committed_together_before_the_first_outcome(
    ledger: Ledger,
) -> None:
    registry = Registry()
    seen: dict[str, int] = {}
    meet = {"arrived": 0}
    met = asyncio.Event()

    @registry.capability("Look a symbol up.", parallel_safe=True)
    async def lookup(symbol: str, ctx: ToolContext) -> str:
        stored = await asyncio.to_thread(ledger.stream, ctx.run_id)
        seen[symbol] = sum(isinstance(e, ev.ToolCallRequested) for e in stored)
        meet["arrived"] += 1
        if meet["arrived"] == 3:
            met.set()
        await asyncio.wait_for(met.wait(), WAIT_S)  # finishes only beside the other two
        return symbol

    calls = [{"name": "lookup", "arguments": {"symbol": s}} for s in "ABC"]
    register_script("batch-pg", [{"tool_calls": calls}, {"content": "done"}])
    runtime = AgentRuntime(ledger, "batcher", models=["scripted/batch-pg"], registry=registry)
    result = asyncio.run(runtime.run(trigger="webhook"))
    runtime.close()
    assert result.status == "completed"
    assert seen == {"A": 3, "B": 3, "C": 3}  # each call ran after all three were stored
    run_id = uuid.UUID(result.run_id)
    events = ledger.stream(run_id)
    at = positions(ledger, "batcher", run_id)
    requested = [at[e.originator_version] for e in events if isinstance(e, ev.ToolCallRequested)]
    finished = [at[e.originator_version] for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert len(requested) == len(finished) == 3
    assert max(requested) < min(finished)
    assert requested == list(range(requested[0], requested[0] + 3))  # one append


def interrupted_batch(ledger: Ledger, agent_id: str) -> str:
    """What a process leaves behind when it dies in the middle of a batch of three calls: the
    three requests committed together, the outcome of the one that finished, none of the
    others (one idempotent, one not)."""
    agent = ledger.register_agent(agent_id)
    queued = agent.queue_run("webhook", focus="interrupted")
    run = Run.start(agent_id, queued)
    run.record(ev.VisibleToolsResolved, tools=["quote", "order", "page"])
    arguments = {"quote": {"symbol": "A"}, "order": {"symbol": "B"}, "page": {"n": 1}}
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for i, name in enumerate(arguments)
    ]
    run.record(
        ev.LLMResponded,
        model="scripted/batch-resume",
        message={"role": "assistant", "content": None, "tool_calls": calls},
        usage={"total_tokens": 120},
    )
    for i, (name, args) in enumerate(arguments.items()):
        run.record(ev.ToolCallRequested, call_id=f"c{i}", tool=name, arguments=args)
    run.record(ev.ToolCallSucceeded, call_id="c0", tool="quote", result="A at 10")
    ledger.append(agent, run)
    return str(queued.run_id)


def test_a_run_resumed_in_the_middle_of_a_batch_repeats_nothing_that_finished(
    ledger: Ledger,
) -> None:
    ran: list[str] = []
    registry = Registry()

    @registry.capability("Read a quote.", parallel_safe=True)
    def quote(symbol: str) -> str:
        ran.append(f"quote {symbol}")
        return f"{symbol} at 11"

    @registry.capability("Place an order (not idempotent).")
    def order(symbol: str) -> str:
        ran.append(f"order {symbol}")
        return f"ordered {symbol}"

    @registry.capability("Read a page.", idempotent=True)
    def page(n: int) -> str:
        ran.append(f"page {n}")
        return f"page {n}"

    run_id = interrupted_batch(ledger, "resumer")
    register_script("batch-resume", [{"content": "not asked"}, {"content": "done"}])
    llm = Capturing()
    runtime = AgentRuntime(
        ledger, "resumer", models=["scripted/batch-resume"], registry=registry, llm=llm
    )
    result = asyncio.run(runtime.resume(uuid.UUID(run_id)))
    runtime.close()
    assert result.status == "completed"
    assert ran == ["page 1"]  # the finished quote is not repeated, the order not placed twice
    events = ledger.stream(uuid.UUID(run_id))
    unknown = [e.call_id for e in events if isinstance(e, ev.ToolOutcomeUnknown)]
    assert sorted(unknown) == ["c1", "c2"]
    succeeded = [e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert sorted(succeeded) == ["c0", "c2"]
    told = [msgspec.json.decode(m["content"]) for m in llm.told]  # in call order
    assert told[0] == "A at 10" and told[2] == "page 1"
    assert told[1]["error_code"] == "OUTCOME_UNKNOWN"
