"""Almost-JSON tool arguments: repaired only when nothing the model wrote is lost or invented,
both texts recorded on ToolCallRequested; valid JSON is never touched, garbage stays
INVALID_ARGUMENTS."""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from owlclaw.audit.verify import replay_run
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.repair import repair_arguments
from owlclaw.tools.spec import MAX_ARGUMENTS_BYTES
from tests.scripted import play, run_events


@pytest.mark.parametrize(
    ("raw", "repaired"),
    [
        ('{"city": "Oslo", "days": 3,}', {"city": "Oslo", "days": 3}),
        ("{'city': 'Oslo', 'days': 3}", {"city": "Oslo", "days": 3}),
        ('{"city": "Oslo", "days": 3', {"city": "Oslo", "days": 3}),
        ('  {city: "Oslo", "exact": True}', {"city": "Oslo", "exact": True}),
        ("{'city': 'Tromsø',}", {"city": "Tromsø"}),
        ("{'city': '', 'tags': ['a', ''],}", {"city": "", "tags": ["a", ""]}),
        ('{"city": "Oslo" "days": 3}', {"city": "Oslo", "days": 3}),
        ('{"city" "Oslo"}', {"city": "Oslo"}),
    ],
)
def test_almost_json_objects_are_repaired(raw: str, repaired: dict[str, Any]) -> None:
    text = repair_arguments(raw)
    assert text is not None and json.loads(text) == repaired


@pytest.mark.parametrize(
    "raw",
    [
        "",  # no arguments: the usual parse's {}
        "   ",
        "garbage",
        "city=Oslo",
        "[1, 2,]",  # not an object
        '{"city": "Oslo", junk junk}',  # words dropped
        '{"city": "Oslo"} and then some',
        'Sure! {"city": "Oslo"}',
        '```json\n{"city": "Oslo"}\n```',
        '{"city": }',  # a value invented
        '{"city":',
        "{" + " " * MAX_ARGUMENTS_BYTES,
    ],
)
def test_what_cannot_be_repaired_safely_is_left_alone(raw: str) -> None:
    assert repair_arguments(raw) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=6), st.booleans())
def test_valid_json_objects_are_never_altered(arguments: dict[str, Any], ascii: bool) -> None:
    assert repair_arguments(json.dumps(arguments, ensure_ascii=ascii)) is None


@given(st.text(max_size=200))
def test_a_repair_is_an_object_that_keeps_every_letter_and_digit(raw: str) -> None:
    repaired = repair_arguments(raw)
    if repaired is not None:
        assert isinstance(msgspec.json.decode(repaired), dict)
        words = [c for c in raw.casefold() if c.isalnum()]
        assert [c for c in repaired.casefold() if c.isalnum()] == words


def forecast_tool(seen: list[dict[str, Any]]) -> Registry:
    registry = Registry()

    @registry.capability("The forecast for a city.")
    def forecast(city: str, days: int) -> str:
        seen.append({"city": city, "days": days})
        return f"{city}: sun for {days} days"

    return registry


def forecast_runtime(ledger: Ledger, registry: Registry) -> AgentRuntime:
    return AgentRuntime(ledger, f"a{uuid.uuid4().hex[:8]}", models=["x"], registry=registry)


def test_the_tool_runs_with_repaired_arguments_and_the_ledger_keeps_both_texts(
    ledger: Ledger,
) -> None:
    seen: list[dict[str, Any]] = []
    registry = forecast_tool(seen)
    runtime = forecast_runtime(ledger, registry)
    raw = "{'city': 'Oslo', 'days': 3,}"
    steps = [{"tool_calls": [{"name": "forecast", "arguments": raw}]}, {"content": "done"}]
    result = play(runtime, steps)
    [requested] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallRequested)]
    [succeeded] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    assert seen == [{"city": "Oslo", "days": 3}]
    assert requested.arguments == {"city": "Oslo", "days": 3}
    assert requested.raw_arguments == raw
    assert json.loads(requested.repaired_arguments) == {"city": "Oslo", "days": 3}
    assert succeeded.result == "Oslo: sun for 3 days" and result.status == "completed"
    report = replay_run(ledger, runtime.agent_id, 1, registry=registry)
    assert report.matched, report.differences


def test_valid_json_records_no_repair_and_garbage_stays_invalid_arguments(
    ledger: Ledger,
) -> None:
    seen: list[dict[str, Any]] = []
    runtime = forecast_runtime(ledger, forecast_tool(seen))
    steps = [
        {"tool_calls": [{"name": "forecast", "arguments": '{"city": "Oslo", "days": 3}'}]},
        {"tool_calls": [{"name": "forecast", "arguments": "{'city': 'Oslo', junk}"}]},
        {"tool_calls": [{"name": "forecast", "arguments": "{'city': 'Oslo', 'days': 'many',}"}]},
        {"content": "done"},
    ]
    events = run_events(ledger, play(runtime, steps))
    [requested] = [e for e in events if isinstance(e, ev.ToolCallRequested)]
    assert requested.raw_arguments == requested.repaired_arguments == ""
    assert "raw_arguments" not in msgspec.to_builtins(requested)
    rejected = [e for e in events if isinstance(e, ev.ToolCallRejected)]
    assert [e.arguments_text for e in rejected] == [
        "{'city': 'Oslo', junk}",
        "{'city': 'Oslo', 'days': 'many',}",
    ]
    assert "not valid JSON" in rejected[0].error and "days" in rejected[1].error
    assert seen == [{"city": "Oslo", "days": 3}]
