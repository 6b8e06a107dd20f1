"""The tool pipeline against the real ledger: hostile arguments to every tool, almost-JSON
arguments repaired, and the idempotency key across a crash and resume."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from owlclaw import ToolContext
from owlclaw.audit.verify import replay_run
from owlclaw.config import RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.capabilities import Registry

pytestmark = pytest.mark.integration

CALL_LIMIT = 3
TERMINAL = tuple(ev.TERMINAL_RUN_EVENTS)
CALL_EVENTS = (ev.ToolCallRequested, ev.ToolCallDenied, ev.ToolCallRejected)


@pytest.fixture(scope="module")
def module_ledger(pg_server: Database) -> Iterator[Ledger]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    with Ledger(db.url) as led:
        yield led
    pg_server.drop_database(name)


def capabilities() -> Registry:
    registry = Registry()

    @registry.capability("Place an order.")
    def place_order(symbol: str, quantity: int, limit_price: float | None = None) -> str:
        return f"{quantity} {symbol}"

    @registry.state("market_state")
    def market_state() -> dict[str, Any]:
        return {"open": True}

    return registry


def field_names() -> list[str]:
    names = {f for tool in BUILTINS.values() for f in tool.spec.params.__struct_fields__}
    return sorted(names | {"symbol", "quantity", "limit_price"})


surrogate = st.sampled_from(["\ud800", "\udfff", "\udc80x"])
text = st.one_of(
    st.text(max_size=40),
    st.builds(lambda a, s, b: a + s + b, st.text(max_size=5), surrogate, st.text(max_size=5)),
    st.integers(1, 300_000).map(lambda n: "y" * n),
)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
nested = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=10)
deep = st.integers(1, 5000).map(lambda depth: "[" * depth + "]" * depth)


def encoded(arguments: dict[str, Any]) -> str:
    """JSON as a model might send it: NaN and Infinity as Python writes them."""
    return json.dumps(arguments, ensure_ascii=False, allow_nan=True)


arguments = st.one_of(
    st.dictionaries(st.sampled_from([*field_names(), "unknown_field"]), nested, max_size=4).map(
        encoded
    ),
    text,
    deep,
    st.just("NaN"),
    st.just('{"delay_seconds": NaN, "focus": "x"}'),
)
tool_names = st.one_of(
    st.sampled_from([*BUILTINS, "place_order"]),
    text.filter(lambda name: name not in BUILTINS),
)
hostile_call = st.fixed_dictionaries({"name": tool_names, "arguments": arguments})


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=st.lists(hostile_call, min_size=1, max_size=CALL_LIMIT + 2))
def test_hostile_arguments_to_every_tool_are_recorded_and_counted(
    module_ledger: Ledger, calls: list[dict[str, Any]]
) -> None:
    runtime = AgentRuntime(
        module_ledger,
        f"h{uuid.uuid4().hex[:10]}",
        models=["x"],
        registry=capabilities(),
        limits=RuntimeConfig(max_function_calls=CALL_LIMIT, tool_timeout_s=5),
    )
    script = uuid.uuid4().hex[:10]
    register_script(script, [{"tool_calls": [c]} for c in calls])
    runtime.models = [f"scripted/{script}"]
    try:
        result = asyncio.run(runtime.run("webhook"))
    finally:
        runtime.close()
    events = module_ledger.stream(uuid.UUID(result.run_id))
    run = module_ledger.load_run(uuid.UUID(result.run_id)).state
    made = [e for e in events if isinstance(e, CALL_EVENTS)]
    requested = {e.call_id for e in made if isinstance(e, ev.ToolCallRequested)}
    settled = {
        e.call_id
        for e in events
        if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut)
    }
    assert sum(isinstance(e, TERMINAL) for e in events) == 1  # the run ended, once
    assert requested == settled  # every executed call has its outcome
    assert run.calls_made == len(made) <= CALL_LIMIT  # every call counted
    ended = events[-1]
    if len(calls) > CALL_LIMIT and len(made) == CALL_LIMIT:
        assert isinstance(ended, ev.RunTerminated)
    if not isinstance(ended, ev.RunTerminated):  # no call was dropped on the way
        assert len(made) == len(calls)
        assert isinstance(ended, ev.RunCompleted)
    assert not any(isinstance(e, ev.RunFailed) for e in events), ended


class Crash(BaseException):
    """The process dies while the tool runs (nothing of the runtime handles it)."""


def test_the_idempotency_key_is_the_same_when_a_crashed_run_resumes(ledger: Ledger) -> None:
    keys: list[str] = []
    registry = Registry()

    @registry.capability("Charge the card (idempotent with its key).", idempotent=True)
    async def charge(amount: int, ctx: ToolContext) -> str:
        keys.append(ctx.idempotency_key)
        if len(keys) == 1:
            raise Crash
        return "charged"

    register_script("charge", [{"tool_calls": [{"name": "charge", "arguments": {"amount": 5}}]}])

    def runtime() -> AgentRuntime:
        return AgentRuntime(ledger, "payer", models=["scripted/charge"], registry=registry)

    crashed = runtime()
    with pytest.raises(Crash):
        asyncio.run(crashed.run("webhook"))
    crashed.close()
    run_id = ledger.load_agent("payer").state.last_run_id
    assert run_id is not None
    stored = ledger.load_run(run_id).state
    assert list(stored.open_calls.values()) == ["charge"] and not stored.ended
    resumed = runtime()
    result = asyncio.run(resumed.resume(run_id))
    resumed.close()
    kinds = [type(e).__name__ for e in ledger.stream(run_id)]
    assert result.status == "completed" and "ToolOutcomeUnknown" in kinds
    assert len(keys) == 2 and keys[0] == keys[1]
    assert not math.isnan(result.duration_ms)


def test_almost_json_arguments_are_repaired_recorded_and_replayed(ledger: Ledger) -> None:
    placed: list[tuple[str, int]] = []
    registry = Registry()

    @registry.capability("Place an order.")
    def place_order(symbol: str, quantity: int) -> str:
        placed.append((symbol, quantity))
        return f"{quantity} {symbol}"

    raw = "{'symbol': 'ACME', 'quantity': 5,"
    register_script(
        "repair",
        [{"tool_calls": [{"name": "place_order", "arguments": raw}]}, {"content": "placed"}],
    )
    runtime = AgentRuntime(ledger, "repairer", models=["scripted/repair"], registry=registry)
    try:
        result = asyncio.run(runtime.run("webhook"))
    finally:
        runtime.close()
    events = ledger.stream(uuid.UUID(result.run_id))
    [requested] = [e for e in events if isinstance(e, ev.ToolCallRequested)]
    assert placed == [("ACME", 5)] and result.status == "completed"
    assert requested.arguments == {"symbol": "ACME", "quantity": 5}
    assert requested.raw_arguments == raw
    assert json.loads(requested.repaired_arguments) == requested.arguments
    report = replay_run(ledger, "repairer", 1, registry=registry)
    assert report.matched, report.differences
    assert placed == [("ACME", 5)]  # the replay served the recorded outcome
