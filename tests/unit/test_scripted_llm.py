"""The scripted litellm provider: deterministic, stateless, driven through litellm itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.llm.scripted import ScriptError, load_script_file, register_script

STEPS = [
    {
        "tool_calls": [
            {"name": "query_state", "arguments": {"state_name": "market_state"}},
            {"name": "log_decision", "arguments": "{not json"},
        ]
    },
    {"content": "Market closed; nothing to do."},
]


def complete(model: str, messages: list[dict[str, Any]]) -> Any:
    litellm = litellm_with_offline_providers()
    return asyncio.run(litellm.acompletion(model=model, messages=messages))


def test_the_step_follows_the_number_of_assistant_messages() -> None:
    register_script("unit-steps", STEPS)
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "check entry opportunities"}]
    first = complete("scripted/unit-steps", conversation)
    calls = first.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["query_state", "log_decision"]
    assert json.loads(calls[0].function.arguments) == {"state_name": "market_state"}
    assert calls[1].function.arguments == "{not json"  # malformed on purpose, passed through
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.usage.total_tokens == 120

    again = complete("scripted/unit-steps", conversation)
    assert [c.id for c in again.choices[0].message.tool_calls] == [c.id for c in calls]

    conversation.append(
        {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]}
    )
    conversation.append({"role": "tool", "tool_call_id": calls[0].id, "content": "{}"})
    second = complete("scripted/unit-steps", conversation)
    assert second.choices[0].message.content == "Market closed; nothing to do."
    assert second.choices[0].finish_reason == "stop"
    conversation.append({"role": "assistant", "content": "Market closed; nothing to do."})
    assert complete("scripted/unit-steps", conversation).choices[0].message.content == "Done."


def test_scripts_load_from_json_files(tmp_path: Path) -> None:
    path = tmp_path / "from-file.json"
    path.write_text(json.dumps({"steps": STEPS, "final": "bye"}))
    assert load_script_file(path) == "from-file"
    reply = complete("scripted/from-file", [{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.tool_calls[0].function.name == "query_state"


def test_bad_scripts_and_unknown_names_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="invalid script 'broken'"):
        register_script("broken", [{"tool_calls": "not a list"}])
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ScriptError, match="cannot read script"):
        load_script_file(bad)
    with pytest.raises(Exception, match="no script named 'nobody'"):
        complete("scripted/nobody", [{"role": "user", "content": "hi"}])


def test_a_script_plays_the_case_its_user_message_names() -> None:
    register_script(
        "unit-cases",
        {
            "cases": [
                {"when": "MARKET ALERT", "steps": [{"content": "recalling"}]},
                {"when": "check entry", "steps": [{"content": "checking"}], "final": "checked"},
            ],
            "steps": [{"content": "default"}],
        },
    )

    def first_reply(user: str) -> str:
        reply = complete("scripted/unit-cases", [{"role": "user", "content": user}])
        return str(reply.choices[0].message.content)

    assert first_reply("market alert: sharp drop") == "recalling"
    assert first_reply("Focus: check entry opportunities") == "checking"
    assert first_reply("something else") == "default"
    conversation = [
        {"role": "user", "content": "check entry"},
        {"role": "assistant", "content": "checking"},
    ]
    assert complete("scripted/unit-cases", conversation).choices[0].message.content == "checked"


def test_arguments_quote_an_earlier_tool_result_of_the_conversation() -> None:
    register_script(
        "unit-refs",
        [
            {"tool_calls": [{"name": "schedule_once", "arguments": {"delay_seconds": 60}}]},
            {
                "tool_calls": [
                    {
                        "name": "cancel_schedule",
                        "arguments": {"schedule_id": "{{result.schedule_once.schedule_id}}"},
                    }
                ]
            },
        ],
    )
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "pre-close review"}]
    [call] = complete("scripted/unit-refs", conversation).choices[0].message.tool_calls
    conversation += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"schedule_id": "sch-42"}'},
    ]
    [cancel] = complete("scripted/unit-refs", conversation).choices[0].message.tool_calls
    assert json.loads(cancel.function.arguments) == {"schedule_id": "sch-42"}
    with pytest.raises(Exception, match="no such result"):
        complete("scripted/unit-refs", [conversation[0], conversation[1]])


def test_a_final_answer_quotes_an_earlier_tool_result_too() -> None:
    register_script(
        "unit-answer",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "hold?"}}]},
            {"content": "The desk answered: {{result.ask_human.answer}}."},
        ],
    )
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "review"}]
    [call] = complete("scripted/unit-answer", conversation).choices[0].message.tool_calls
    conversation += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"answer": "hold"}'},
    ]
    final = complete("scripted/unit-answer", conversation).choices[0].message.content
    assert final == "The desk answered: hold."


def test_a_scripted_model_is_priced_at_zero_as_litellm_prices_provider_models() -> None:
    """Unpriced, every call went through litellm's unmapped-model path, which no priced model
    takes; the calls' cost stays zero."""
    litellm = litellm_with_offline_providers()
    register_script("unit-priced", [{"content": "done"}])
    assert "scripted/unit-priced" not in litellm.model_cost
    answer = complete("scripted/unit-priced", [{"role": "user", "content": "go"}])
    info = litellm.get_model_info("scripted/unit-priced")
    assert (info["input_cost_per_token"], info["output_cost_per_token"]) == (0.0, 0.0)
    assert answer._hidden_params["response_cost"] == 0.0


def test_the_documented_example_plays_its_steps_and_its_case() -> None:
    """docs/scripted-model.md's example, as a user copies it: the top-level steps for a focus
    no case names, the case (with a quoted earlier result) for one that does."""
    doc = (Path(__file__).parents[2] / "docs" / "scripted-model.md").read_text()
    example = doc.split("```json\n", 1)[1].split("```", 1)[0]
    register_script("documented", json.loads(example))
    steps = complete("scripted/documented", [{"role": "user", "content": "check the queue"}])
    assert steps.choices[0].message.tool_calls[0].function.name == "query_state"
    case: list[dict[str, Any]] = [{"role": "user", "content": "Follow up later"}]
    first = complete("scripted/documented", case).choices[0].message
    assert first.tool_calls[0].function.name == "schedule_once"
    call = first.tool_calls[0]
    case += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"schedule_id": "s-7"}'},
    ]
    second = complete("scripted/documented", case).choices[0].message.tool_calls[0]
    assert json.loads(second.function.arguments) == {"schedule_id": "s-7"}


def test_an_unknown_key_in_a_script_is_refused_naming_the_nearest() -> None:
    with pytest.raises(ScriptError, match=r"unknown key 'step' \(did you mean 'steps'\?\)"):
        register_script("typo", {"step": [{"content": "hi"}]})
    with pytest.raises(ScriptError, match=r"steps\[0\]\.tool_calls\[0\]: unknown key 'nam'"):
        register_script("typo", [{"tool_calls": [{"nam": "query_state"}]}])
