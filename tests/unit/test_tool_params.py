"""Tool parameters: schemas generated from the typed structures, and validation that turns
anything a model may send into either typed parameters or a structured error — never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owlclaw.tools.builtin import params as p
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import MAX_ARGUMENTS_BYTES, ToolSpec

SPECS = [
    ToolSpec("schedule_once", "Schedule a one-time run.", p.ScheduleOnce),
    ToolSpec("schedule_cron", "Schedule a recurring run.", p.ScheduleCron),
    ToolSpec("cancel_schedule", "Cancel a schedule.", p.CancelSchedule),
    ToolSpec("remember", "Store a memory.", p.Remember),
    ToolSpec("recall", "Search memory.", p.Recall, idempotent=True),
    ToolSpec("query_state", "Read business state.", p.QueryState, idempotent=True),
    ToolSpec("log_decision", "Record a decision.", p.LogDecision),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=15), children, max_size=4)
    ),
    max_leaves=12,
)


def test_schemas_carry_the_specified_bounds() -> None:
    schemas = {s.name: s.function_schema()["function"]["parameters"] for s in SPECS}
    once = schemas["schedule_once"]
    assert once["required"] == ["delay_seconds", "focus"]
    assert once["properties"]["delay_seconds"] | {"description": ""} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 2_592_000,
        "description": "",
    }
    assert schemas["remember"]["properties"]["content"]["maxLength"] == 2000
    assert schemas["recall"]["properties"]["limit"]["default"] == 5
    assert schemas["query_state"]["properties"]["state_name"]["pattern"] == "^[A-Za-z0-9_]+$"
    assert set(schemas["log_decision"]["properties"]["decision_type"]["enum"]) == {
        "capability_selection",
        "schedule_decision",
        "no_action",
        "other",
    }
    assert all(s["additionalProperties"] is False for s in schemas.values())
    json.dumps(schemas)  # plain JSON, ready for litellm


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@given(
    arguments=st.one_of(
        json_values.map(json.dumps),
        st.dictionaries(
            st.sampled_from(
                [
                    "delay_seconds",
                    "focus",
                    "cron_expression",
                    "schedule_id",
                    "content",
                    "tags",
                    "query",
                    "limit",
                    "state_name",
                    "reasoning",
                    "decision_type",
                    "extra",
                ]
            ),
            json_values,
            max_size=5,
        ).map(json.dumps),
        st.text(max_size=200),
        st.binary(max_size=50),
    )
)
def test_any_arguments_give_params_or_a_structured_error(spec: ToolSpec, arguments: Any) -> None:
    result = spec.parse(arguments)
    assert isinstance(result, spec.params | ToolError)
    if isinstance(result, ToolError):
        assert result.error_code == "INVALID_ARGUMENTS" and spec.name in result.error
        assert result.kind == "user" and result.retryable is False


@pytest.mark.parametrize(
    ("spec_index", "arguments", "expected"),
    [
        (
            0,
            '{"delay_seconds": 2, "focus": "check entry opportunities"}',
            p.ScheduleOnce(delay_seconds=2, focus="check entry opportunities"),
        ),
        (0, '{"delay_seconds": "2", "focus": "f"}', p.ScheduleOnce(delay_seconds=2, focus="f")),
        (4, '{"query": "market crash"}', p.Recall(query="market crash", limit=5)),
        (6, '{"reasoning": "closed"}', p.LogDecision(reasoning="closed", decision_type="other")),
    ],
)
def test_valid_arguments_become_typed_parameters(
    spec_index: int, arguments: str, expected: Any
) -> None:
    assert SPECS[spec_index].parse(arguments) == expected


@pytest.mark.parametrize(
    ("spec_index", "arguments", "fragment"),
    [
        (0, '{"delay_seconds": 0, "focus": "f"}', "delay_seconds"),
        (0, '{"delay_seconds": -5, "focus": "f"}', "delay_seconds"),
        (0, '{"delay_seconds": 2592001, "focus": "f"}', "delay_seconds"),
        (0, '{"delay_seconds": 5}', "focus"),
        (3, json.dumps({"content": "x" * 2001}), "content"),
        (3, '{"content": ""}', "content"),
        (4, '{"query": "q", "limit": 21}', "limit"),
        (5, '{"state_name": "market state; DROP TABLE"}', "state_name"),
        (6, '{"reasoning": "r", "decision_type": "yolo"}', "decision_type"),
        (2, '{"schedule_id": "s1", "force": true}', "force"),
        (0, "{'delay_seconds': 5}", "not valid JSON"),
        (0, "[" * 30_000 + "]" * 30_000, "nested too deeply"),
        (1, '{"schedule_id": ' + "[" * 30_000 + "]" * 30_000 + "}", "nested too deeply"),
    ],
)
def test_invalid_arguments_name_the_problem(spec_index: int, arguments: str, fragment: str) -> None:
    result = SPECS[spec_index].parse(arguments)
    assert isinstance(result, ToolError) and fragment in result.error


def test_exactly_2000_characters_are_accepted_and_huge_arguments_refused() -> None:
    remember = SPECS[3]
    assert isinstance(remember.parse(json.dumps({"content": "y" * 2000})), p.Remember)
    huge = json.dumps({"content": "z" * (MAX_ARGUMENTS_BYTES + 1)})
    result = remember.parse(huge)
    assert isinstance(result, ToolError) and "limit" in result.error
