"""send_message: channel configuration checks, the arguments' bounds, the refusal of an unknown
channel, and the MessageSent it records (no network: the outbox delivers, tested apart)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from events import catalog as ev
from events.agent import Agent
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.messages import MAX_TEXT_CHARS, ChannelConfig, message_tools
from projections.channels import deliver
from projections.delivery import Undelivered
from tests.tool_context import tool_context

OPS = ChannelConfig(url="https://hooks.example.com/ops", headers_env={"Authorization": "OPS_TOKEN"})


def aggregates() -> tuple[Agent, Run]:
    agent = Agent.blank(agent_stream_id("courier"))
    agent.record(ev.AgentRegistered, agent_id="courier")
    return agent, Run.start("courier", agent.queue_run("webhook"))


def send(run: Run, agent: Agent, call_id: str, **arguments: Any) -> Any:
    tool = message_tools({"ops": OPS})["send_message"]
    params = tool.spec.parse(arguments)
    assert not isinstance(params, ToolError), params
    return asyncio.run(tool.execute(params, tool_context(agent, run, call_id)))


def test_a_message_is_recorded_on_the_run_with_where_it_goes_but_no_secret() -> None:
    agent, run = aggregates()
    result = send(run, agent, "call-1", channel="ops", text="disk almost full")
    [sent] = [e for e in run.pending_events if isinstance(e, ev.MessageSent)]
    assert result == {"message_id": sent.message_id, "channel": "ops", "queued": True}
    assert (sent.agent_id, sent.run_id, sent.channel, sent.kind, sent.url, sent.text) == (
        "courier",
        run.id,
        "ops",
        "webhook",
        "https://hooks.example.com/ops",
        "disk almost full",
    )
    assert sent.headers_env == {"Authorization": "OPS_TOKEN"}
    assert (sent.timeout_s, sent.attempts) == (OPS.timeout_s, OPS.attempts)


def test_the_message_id_is_the_calls_so_a_resumed_call_sends_the_same_message() -> None:
    agent, run = aggregates()
    first = send(run, agent, "call-1", channel="ops", text="a")["message_id"]
    again = send(run, agent, "call-1", channel="ops", text="a")["message_id"]
    other = send(run, agent, "call-2", channel="ops", text="a")["message_id"]
    assert first == again != other


def test_an_unknown_channel_is_refused_naming_the_configured_ones() -> None:
    agent, run = aggregates()
    result = send(run, agent, "call-1", channel="sms", text="hi")
    assert isinstance(result, ToolError)
    assert result.error_code == "UNKNOWN_CHANNEL" and "ops" in result.error
    assert not any(isinstance(e, ev.MessageSent) for e in run.pending_events)


@pytest.mark.parametrize("text", ["", "x" * (MAX_TEXT_CHARS + 1)])
def test_the_text_is_bounded(text: str) -> None:
    spec = message_tools({"ops": OPS})["send_message"].spec
    refused = spec.parse({"channel": "ops", "text": text})
    assert isinstance(refused, ToolError) and refused.error_code == "INVALID_ARGUMENTS"
    assert "text" in refused.error


def test_the_tool_is_a_dangerous_message_tool_whose_effect_is_in_the_ledger() -> None:
    spec = message_tools({})["send_message"].spec
    assert (spec.category, spec.dangerous, spec.effect_in_ledger) == ("message", True, True)


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        ({"url": "https://user:secret@hooks.example.com/"}, "headers_env"),
        ({"url": "ftp://hooks.example.com/"}, "url"),
        ({"url": "https:///path"}, "no host"),
        ({"url": "https://h.example.com/", "kind": "sms"}, "kind"),
        ({"url": "https://h.example.com/", "headers_env": {"X-Key": "not a name"}}, "headers_env"),
        ({"url": "https://h.example.com/", "headers_env": {"Idempotency-Key": "K"}}, "outbox"),
        ({"url": "https://h.example.com/", "attempts": 0}, "attempts"),
        ({"url": "https://h.example.com/", "token": "x"}, "token"),
    ],
)
def test_a_bad_channel_table_is_refused_naming_the_problem(
    table: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match=complaint):
        msgspec.convert(table, ChannelConfig)


def test_a_header_whose_variable_is_unset_is_not_sent_and_says_which(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPS_TOKEN", raising=False)
    agent, run = aggregates()
    send(run, agent, "call-1", channel="ops", text="hi")
    [sent] = [e for e in run.pending_events if isinstance(e, ev.MessageSent)]
    with pytest.raises(Undelivered, match="OPS_TOKEN") as failure:
        deliver(sent)
    assert failure.value.attempts == 0
