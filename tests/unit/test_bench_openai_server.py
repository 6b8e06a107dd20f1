"""The bench's loopback OpenAI-compatible server: what it answers is a chat completion the OpenAI
client reads (tool calls, then a final message), and it notes each conversation's requests."""

from __future__ import annotations

import asyncio
import json

from aiohttp.test_utils import TestClient, TestServer
from openai.types.chat import ChatCompletion

from owlclaw.bench.openai_server import completion, make_app

USER: dict[str, object] = {"role": "user", "content": "Trigger: webhook\nFocus: one"}


def _request(assistant_messages: int) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "be brief"}, USER]
    for i in range(assistant_messages):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "{}"},
        ]
    return {"model": "gpt-4o-mini", "messages": messages, "tools": []}


def test_it_calls_log_decision_until_the_steps_are_done_then_answers() -> None:
    for step in range(2):
        parsed = ChatCompletion.model_validate(completion(_request(step), steps=2, number=step))
        choice = parsed.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [c.function.name for c in calls] == ["log_decision"]  # type: ignore[union-attr]
        arguments = json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
        assert arguments == {"reasoning": f"step {step}", "decision_type": "other"}
    final = ChatCompletion.model_validate(completion(_request(2), steps=2, number=2))
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == "done"
    assert final.choices[0].message.tool_calls is None
    assert final.usage is not None and final.usage.total_tokens > 0


def test_the_server_answers_over_http_and_notes_each_conversations_requests() -> None:
    async def exchange() -> tuple[list[ChatCompletion], dict[str, object]]:
        async with TestClient(TestServer(make_app(steps=1))) as client:
            answers = []
            for step in range(2):
                response = await client.post("/v1/chat/completions", json=_request(step))
                answers.append(ChatCompletion.model_validate(await response.json()))
            seen = await (await client.get("/bench/conversations")).json()
        return answers, seen

    answers, seen = asyncio.run(exchange())
    assert [a.choices[0].finish_reason for a in answers] == ["tool_calls", "stop"]
    assert answers[0].id != answers[1].id
    conversation = seen[str(USER["content"])]
    assert isinstance(conversation, dict)
    assert len(conversation["arrivals"]) == 2
    assert conversation["arrivals"][0] <= conversation["arrivals"][1]
    assert conversation["last_request"] == json.loads(json.dumps(_request(1)))
