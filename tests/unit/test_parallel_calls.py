"""One model response with several calls, on the in-memory ledger: parallel-safe calls run side
by side under the run's limit, a barrier alone, every request written ahead of the first call,
results told in call order; approvals, rate limits, call limits and the doom loop see each call.
Concurrency is shown by calls waiting for each other (never by timing)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw import ToolContext
from owlclaw.app import RateLimit
from owlclaw.audit.verify import replay_run
from owlclaw.config import RuntimeConfig
from owlclaw.messages import AnswerApproval, Decision
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from owlclaw.tools.pack.files import FilesConfig, file_tools
from owlclaw.tools.pack.spawn import SpawnConfig, spawn_tools
from tests.scripted import call, play, run_events

WAIT_S = 10.0
"""How long a call waits for the others of its batch before it says it ran alone (a failure
of the test, not a timing it depends on)."""


class Capturing:
    """The in-process litellm, noting the tool results each call tells the model."""

    def __init__(self) -> None:
        self.inner = LiteLLM()
        self.told: list[dict[str, Any]] = []

    async def complete(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], t: float
    ) -> Answer:
        self.told = [m for m in messages if m.get("role") == "tool"]
        return await self.inner.complete(model, messages, tools, t)


def runtime_with(
    ledger: Ledger, registry: Registry, governance: Governance | None = None, **limits: Any
) -> tuple[AgentRuntime, Capturing]:
    llm = Capturing()
    runtime = AgentRuntime(
        ledger,
        f"p{uuid.uuid4().hex[:8]}",
        models=["x"],
        registry=registry,
        limits=RuntimeConfig(**limits),
        governance=governance,
        llm=llm,
    )
    return runtime, llm


class Meeting:
    """Calls that each wait until ``expected`` of them are running: they finish only if they
    run side by side. Notes the most that ran at once."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.running = 0
        self.most = 0
        self.arrived = 0
        self.met = asyncio.Event()

    async def attend(self) -> bool:
        self.running += 1
        self.arrived += 1
        self.most = max(self.most, self.running)
        if self.arrived >= self.expected:
            self.met.set()
        try:
            await asyncio.wait_for(self.met.wait(), WAIT_S)
            return True
        except TimeoutError:
            return False
        finally:
            self.running -= 1


def results(told: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in told]


def test_parallel_safe_calls_run_side_by_side_and_the_model_hears_them_in_call_order(
    ledger: Ledger,
) -> None:
    registry = Registry()
    meeting = Meeting(3)
    last = asyncio.Event()

    @registry.capability("Look a symbol up.", parallel_safe=True)
    async def lookup(symbol: str) -> dict[str, Any]:
        met = await meeting.attend()
        if symbol == "A":  # the first call finishes last
            await asyncio.wait_for(last.wait(), WAIT_S)
        if symbol == "C":
            last.set()
        return {"symbol": symbol, "met": met}

    runtime, llm = runtime_with(ledger, registry)
    calls = [call("lookup", symbol=s) for s in "ABC"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "completed"
    assert results(llm.told) == [f'{{"symbol":"{s}","met":true}}' for s in "ABC"]
    events = run_events(ledger, result)
    finished = [e.result["symbol"] for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert finished[-1] == "A"  # recorded as they finished
    kinds = [type(e) for e in events if isinstance(e, ev.ToolCallRequested | ev.ToolCallSucceeded)]
    assert kinds == [ev.ToolCallRequested] * 3 + [ev.ToolCallSucceeded] * 3


def test_every_request_of_the_batch_is_committed_before_the_first_call_runs(
    ledger: Ledger,
) -> None:
    registry = Registry()
    seen: list[int] = []

    @registry.capability("Place an order.")
    def order(symbol: str, ctx: ToolContext) -> str:
        stored = ledger.stream(ctx.run_id)
        seen.append(sum(isinstance(e, ev.ToolCallRequested) for e in stored))
        return symbol

    runtime, _ = runtime_with(ledger, registry)
    calls = [call("order", symbol=s) for s in "AB"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "completed"
    assert seen == [2, 2]


def test_no_more_calls_run_at_once_than_the_runs_limit(ledger: Ledger) -> None:
    registry = Registry()
    running: list[int] = [0]
    most: list[int] = [0]

    @registry.capability("Read a page.", idempotent=True)
    async def page(n: int) -> int:
        running[0] += 1
        most[0] = max(most[0], running[0])
        for _ in range(5):
            await asyncio.sleep(0)
        running[0] -= 1
        return n

    runtime, llm = runtime_with(ledger, registry, parallel_tool_calls=2)
    result = play(
        runtime, [{"tool_calls": [call("page", n=n) for n in range(5)]}, {"content": "read"}]
    )
    assert result.status == "completed"
    assert most[0] == 2
    assert results(llm.told) == [str(n) for n in range(5)]


def test_a_call_that_is_not_parallel_safe_runs_alone_between_the_others(ledger: Ledger) -> None:
    registry = Registry()
    log: list[str] = []
    running: set[str] = set()

    @registry.capability("Read a quote.", parallel_safe=True)
    async def quote(symbol: str) -> str:
        running.add(symbol)
        log.append(f"start {symbol}")
        for _ in range(3):
            await asyncio.sleep(0)
        running.discard(symbol)
        log.append(f"end {symbol}")
        return symbol

    @registry.capability("Place an order.")
    async def order(symbol: str) -> str:
        log.append(f"order alone={not running}")
        return f"ordered {symbol}"

    runtime, llm = runtime_with(ledger, registry)
    calls = [
        call("quote", symbol="A"),
        call("quote", symbol="B"),
        call("order", symbol="A"),
        call("quote", symbol="C"),
    ]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "completed"
    assert log == ["start A", "start B", "end A", "end B", "order alone=True", "start C", "end C"]
    assert results(llm.told) == ['"A"', '"B"', '"ordered A"', '"C"']


def test_one_call_asking_for_approval_parks_the_run_after_the_others_finished(
    ledger: Ledger,
) -> None:
    registry = Registry()
    ran: list[str] = []

    @registry.capability("Look a symbol up.", parallel_safe=True)
    def lookup(symbol: str) -> str:
        ran.append(f"lookup {symbol}")
        return symbol

    @registry.capability("Place an order.", ask_if="amount > 1000")
    def order(symbol: str, amount: float) -> str:
        ran.append(f"order {symbol}")
        return f"ordered {symbol}"

    runtime, llm = runtime_with(ledger, registry)
    calls = [
        call("lookup", symbol="A"),
        call("order", symbol="A", amount=5000),
        call("lookup", symbol="B"),
    ]
    parked = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert parked.status == "parked"
    assert sorted(ran) == ["lookup A", "lookup B"]
    requested = [e.tool for e in run_events(ledger, parked) if isinstance(e, ev.ToolCallRequested)]
    assert requested == ["lookup", "lookup"]

    [(approval_id, approval)] = runtime.setup.head().state.approvals.items()
    decision = Decision(approval_id, True, "ops", digest=approval.shown()[1])
    agent_id = runtime.setup.agent_id
    asyncio.run(runtime.inbox.answer_approval(AnswerApproval(agent_id=agent_id, decision=decision)))
    resumed = asyncio.run(runtime.resume(uuid.UUID(parked.run_id)))
    assert resumed.status == "completed"
    assert sorted(ran) == ["lookup A", "lookup B", "order A"]  # nothing finished ran again
    assert results(llm.told) == ['"A"', '"ordered A"', '"B"']


def test_the_rate_limit_sees_each_call_of_a_batch(ledger: Ledger) -> None:
    registry = Registry()

    @registry.capability("Look a symbol up.", parallel_safe=True)
    def lookup(symbol: str) -> str:
        return symbol

    limited = Governance(rate_limits={"lookup": RateLimit(calls=2, per_seconds=3600)})
    runtime, llm = runtime_with(ledger, registry, limited)
    calls = [call("lookup", symbol=s) for s in "ABC"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "completed"
    events = run_events(ledger, result)
    assert [e.error_code for e in events if isinstance(e, ev.ToolCallDenied)] == ["RATE_LIMITED"]
    assert '"RATE_LIMITED"' in llm.told[2]["content"]


def test_a_call_limit_reached_mid_batch_ends_the_run_after_the_calls_before_it(
    ledger: Ledger,
) -> None:
    registry = Registry()
    ran: list[str] = []

    @registry.capability("Look a symbol up.", parallel_safe=True)
    def lookup(symbol: str) -> str:
        ran.append(symbol)
        return symbol

    runtime, _ = runtime_with(ledger, registry, max_function_calls=2)
    calls = [call("lookup", symbol=s) for s in "ABC"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "terminated"
    assert sorted(ran) == ["A", "B"]
    events = run_events(ledger, result)
    requested = {e.call_id for e in events if isinstance(e, ev.ToolCallRequested)}
    settled = {e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)}
    assert requested == settled and len(requested) == 2


def test_the_doom_loop_sees_each_failing_call_of_a_batch(ledger: Ledger) -> None:
    registry = Registry()

    @registry.capability("Look a symbol up.", parallel_safe=True)
    def lookup(symbol: str) -> str:
        raise RuntimeError(f"{symbol} is down")

    runtime, _ = runtime_with(ledger, registry, doom_loop_failures=3)
    calls = [call("lookup", symbol=s) for s in "ABC"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    assert result.status == "terminated"
    [ended] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunTerminated)]
    assert ended.reason.startswith("doom loop: lookup failed 3 times in a row")


def test_a_batch_whose_calls_finished_out_of_call_order_replays_without_differences(
    ledger: Ledger,
) -> None:
    registry = Registry()
    first_may_end = asyncio.Event()

    @registry.capability("Look a symbol up.", parallel_safe=True)
    async def lookup(symbol: str) -> str:
        if symbol == "A":
            await asyncio.wait_for(first_may_end.wait(), WAIT_S)
        else:
            first_may_end.set()
        return symbol

    runtime, _ = runtime_with(ledger, registry)
    calls = [call("lookup", symbol=s) for s in "AB"]
    result = play(runtime, [{"tool_calls": calls}, {"content": "done"}])
    events = run_events(ledger, result)
    assert [e.result for e in events if isinstance(e, ev.ToolCallSucceeded)] == ["B", "A"]
    report = replay_run(ledger, runtime.agent_id, 1, registry=registry)
    assert report.matched, report.differences


def test_idempotent_tools_run_side_by_side_unless_they_say_otherwise(tmp_path: Path) -> None:
    registry = Registry()

    @registry.capability("Read.", idempotent=True)
    def read() -> None: ...

    @registry.capability("Write, idempotently.", idempotent=True, parallel_safe=False)
    def write() -> None: ...

    @registry.capability("Append.", parallel_safe=True)
    def append() -> None: ...

    @registry.capability("Order.")
    def order() -> None: ...

    side_by_side = {n for n, c in registry.capabilities.items() if c.spec.runs_in_parallel}
    assert side_by_side == {"read", "append"}
    pack = {
        **spawn_tools(SpawnConfig(), None),
        **file_tools(tmp_path, FilesConfig()),
        **BUILTINS,
    }
    assert {n for n, t in pack.items() if t.spec.runs_in_parallel} == {
        "read_file",
        "list_dir",
        "list_schedules",
        "load_skill",
        "recall",
        "query_state",
    }
