"""The tool pipeline on the in-memory ledger: timeouts, error classification, JSON-safe results,
truncation, honest call limits, doom loops, the call context and operator-disabled tools."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import msgspec

from events import Ledger
from events import catalog as ev
from owlclaw import ToolContext
from owlclaw.audit.verify import replay_run
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.encoding import canonical_arguments, truncate
from owlclaw.tools.governance import OPERATOR_DISABLED
from owlclaw.tools.switches import change_tools_directly
from tests.scripted import call, play, run_events


class Opaque:
    """A result msgspec cannot encode."""

    def __repr__(self) -> str:
        return "Opaque(42)"


def runtime_with(
    ledger: Ledger, registry: Registry, **limits: Any
) -> tuple[AgentRuntime, list[dict[str, Any]]]:
    """A runtime whose model conversations are captured (what the model was told)."""
    llm = Capturing()
    runtime = AgentRuntime(
        ledger,
        f"a{uuid.uuid4().hex[:8]}",
        models=["x"],
        registry=registry,
        limits=RuntimeConfig(**limits),
        llm=llm,
    )
    return runtime, llm.told


class Capturing:
    """The in-process litellm, noting the tool results each call tells the model."""

    def __init__(self) -> None:
        self.inner = LiteLLM()
        self.told: list[dict[str, Any]] = []

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        self.told.extend(m for m in messages if m.get("role") == "tool")
        return await self.inner.complete(model, messages, tools, timeout_s)


def test_a_result_above_the_limit_reaches_the_model_cut_and_the_ledger_whole(
    ledger: Ledger,
) -> None:
    registry = Registry()
    rows = [{"row": i, "text": "x" * 90} for i in range(400)]  # ~40 KB of JSON

    @registry.capability("Read the report.", max_result_bytes=4096)
    def report() -> list[dict[str, Any]]:
        return rows

    runtime, told = runtime_with(ledger, registry)
    result = play(runtime, [{"tool_calls": [call("report")]}, {"content": "read"}])
    [succeeded] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    whole = len(msgspec.json.encode(rows))
    assert succeeded.result == rows and succeeded.result_bytes == whole and succeeded.truncated
    content = told[0]["content"]
    cut = whole - len(content.split("\n[truncated: ")[0].encode())
    assert content.endswith(f"\n[truncated: {cut} of {whole} bytes cut]")
    assert len(content.encode()) <= 4096 + 60 and content.startswith('[{"row":0,')
    assert result.status == "completed"


def test_truncation_cuts_at_a_clean_boundary_and_never_inside_a_character() -> None:
    text, truncated = truncate(("é" * 3000).encode(), 1001)
    assert truncated and text.startswith("é" * 500) and "\ufffd" not in text
    text, _ = truncate(b'{"a": "' + b"word " * 1000 + b'"}', 103)
    assert text.split("\n")[0].endswith(" ")
    assert truncate(b'{"a":1}', 7) == ('{"a":1}', False)


def test_a_huge_or_unencodable_result_is_recorded_bounded_and_the_run_goes_on(
    ledger: Ledger,
) -> None:
    registry = Registry()

    @registry.capability("Return an object of our own class.")
    def opaque() -> Any:
        return {"thing": Opaque(), "tags": {"a"}, "raw": b"\x00\x01"}

    @registry.capability("Return 100 MB.")
    def flood() -> str:
        return "x" * 100_000_000

    runtime, told = runtime_with(ledger, registry)
    steps = [{"tool_calls": [call("opaque")]}, {"tool_calls": [call("flood")]}, {"content": "ok"}]
    result = play(runtime, steps)
    first, second = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert first.result == {"thing": "Opaque(42)", "tags": ["a"], "raw": "AAE="}
    assert second.result_bytes == 100_000_002 and second.truncated
    assert len(second.result) <= 1024 * 1024 + 100 and "[truncated: " in second.result
    assert len(told[1]["content"]) <= 16 * 1024 + 60
    assert result.status == "completed"
    report = replay_run(ledger, runtime.agent_id, 1, registry=registry)
    assert report.matched, report.differences


def test_a_hung_tool_times_out_sync_or_async_and_the_model_is_told(ledger: Ledger) -> None:
    """Both tools hang until the test lets them go, after the run: the run goes on without them
    (their limit, not their answer, ends the calls), however slow the machine."""
    registry = Registry()
    release = threading.Event()
    returned: list[str] = []

    @registry.capability("Block on a slow service.", timeout_s=0.2)
    def blocking() -> str:
        release.wait(60)
        returned.append("blocking")
        return "late"

    @registry.capability("Await a slow service.", timeout_s=0.2, idempotent=True)
    async def waiting() -> str:
        await asyncio.sleep(60)
        returned.append("waiting")
        return "late"

    runtime, told = runtime_with(ledger, registry)
    began = time.perf_counter()
    steps = [{"tool_calls": [call("blocking"), call("waiting")]}, {"content": "moved on"}]
    try:
        result = play(runtime, steps)
        took = time.perf_counter() - began
        assert returned == []  # the run ended while both tools still hung
    finally:
        release.set()
    timed_out = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallTimedOut)]
    assert [(e.tool, e.timeout_s) for e in timed_out] == [("blocking", 0.2), ("waiting", 0.2)]
    assert all(0.2 <= e.duration_ms / 1000 <= took for e in timed_out)
    errors = [msgspec.json.decode(m["content"]) for m in told]
    assert [(e["error_code"], e["retryable"]) for e in errors] == [
        ("TIMEOUT", False),
        ("TIMEOUT", True),
    ]
    assert result.status == "completed"


def test_a_system_error_keeps_its_traceback_and_idempotent_tools_retry(ledger: Ledger) -> None:
    registry = Registry()
    attempts: list[float] = []

    @registry.capability("Read a flaky service.", idempotent=True)
    def flaky() -> str:
        attempts.append(time.monotonic())
        raise ConnectionError("service unreachable")

    runtime, _ = runtime_with(ledger, registry, tool_retries=2)
    result = play(runtime, [{"tool_calls": [call("flaky")]}, {"content": "gave up"}])
    [failed] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallFailed)]
    assert len(attempts) == 3 and attempts[2] - attempts[1] >= 0.09  # backoff grows
    assert failed.error == "ConnectionError: service unreachable" and failed.retryable
    assert "Traceback" in failed.traceback and 'raise ConnectionError("service' in failed.traceback


def test_every_call_counts_toward_the_limit_whatever_its_outcome(ledger: Ledger) -> None:
    runtime, _ = runtime_with(ledger, Registry(), max_function_calls=4, doom_loop_failures=10)
    bad = [
        call("no_such_tool", x=1),
        call("log_decision", reasoning=""),
        call("another_unknown"),
        call("log_decision", reasoning="fine"),
        call("log_decision", reasoning="one too many"),
    ]
    result = play(runtime, [{"tool_calls": [c]} for c in bad])
    events = run_events(ledger, result)
    [end] = [e for e in events if isinstance(e, ev.RunTerminated)]
    assert end.reason == "reached the limit of 4 function calls"
    kinds = [type(e).__name__ for e in events if type(e).__name__.startswith("ToolCall")]
    assert kinds == [
        "ToolCallRejected",
        "ToolCallRejected",
        "ToolCallRejected",
        "ToolCallRequested",
        "ToolCallSucceeded",
    ]


def test_identical_calls_compare_parsed_arguments() -> None:
    assert canonical_arguments('{"b": 1, "a": [1, 2]}') == canonical_arguments('{"a":[1,2],"b":1}')
    assert canonical_arguments("not json") == "not json"


def test_reordered_identical_calls_stop_the_run(ledger: Ledger) -> None:
    runtime, _ = runtime_with(ledger, Registry())
    texts = [
        '{"reasoning": "same", "decision_type": "other"}',
        '{"decision_type":"other","reasoning":"same"}',
        '{ "decision_type": "other", "reasoning": "same" }',
    ]
    steps = [{"tool_calls": [{"name": "log_decision", "arguments": t}]} for t in texts]
    result = play(runtime, steps)
    [end] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunTerminated)]
    assert end.reason == "log_decision called 3 times with identical arguments"


def test_a_doom_loop_ends_the_run_naming_the_call(ledger: Ledger) -> None:
    registry = Registry()

    @registry.capability("Place an order.")
    def place_order(symbol: str) -> str:
        raise RuntimeError("exchange closed")

    runtime, _ = runtime_with(ledger, registry)
    steps = [{"tool_calls": [call("place_order", symbol=s)]} for s in ("A", "B", "C", "D")]
    result = play(runtime, steps)
    events = run_events(ledger, result)
    [end] = [e for e in events if isinstance(e, ev.RunTerminated)]
    assert result.status == "terminated"
    assert end.reason == (
        "doom loop: place_order failed 3 times in a row with TOOL_FAILED"
        ' (last arguments: {"symbol": "C"})'
    )
    assert sum(isinstance(e, ev.ToolCallFailed) for e in events) == 3


def test_a_handler_gets_its_call_context_when_it_asks_for_it(ledger: Ledger) -> None:
    registry = Registry()
    seen: list[ToolContext] = []

    @registry.capability("Send a payment.")
    def pay(amount: int, context: ToolContext) -> str:
        seen.append(context)
        return "sent"

    schema = registry.capabilities["pay"].spec.function_schema()["function"]["parameters"]
    assert list(schema["properties"]) == ["amount"]
    runtime, _ = runtime_with(ledger, registry)
    result = play(runtime, [{"tool_calls": [call("pay", amount=5)]}, {"content": "paid"}])
    [ctx] = seen
    [requested] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallRequested)]
    assert (ctx.agent_id, str(ctx.run_id), ctx.call_id) == (
        runtime.agent_id,
        result.run_id,
        requested.call_id,
    )
    assert ctx.idempotency_key == str(uuid.uuid5(ctx.run_id, ctx.call_id))


def test_a_tool_the_operator_disabled_is_hidden_and_a_call_to_it_denied(ledger: Ledger) -> None:
    runtime, told = runtime_with(ledger, Registry())
    ledger.register_agent(runtime.agent_id)
    change_tools_directly(
        ledger, runtime.agent_id, list(runtime.setup.tools()), [], ["remember"], "test"
    )
    result = play(runtime, [{"tool_calls": [call("remember", content="x")]}, {"content": "ok"}])
    events = run_events(ledger, result)
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    [denied] = [e for e in events if isinstance(e, ev.ToolCallDenied)]
    assert "remember" not in visible.tools
    assert visible.filtered["remember"] == denied.reason == OPERATOR_DISABLED
    assert msgspec.json.decode(told[0]["content"])["error_code"] == "TOOL_DENIED"
