"""Enabling and disabling an agent's tools (ToolsChanged): the Agent keeps the disabled set and
governance hides those tools from the next run and refuses calls to them."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.agent_state import UnknownTools
from owlclaw.messages import ChangeTools
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.governance import OPERATOR_DISABLED
from owlclaw.tools.switches import change_tools_directly
from tests.scripted import agent_events, call, play, run_events

KNOWN = ["remember", "recall", "log_decision"]


def test_the_agent_keeps_the_disabled_set_and_records_only_changes(ledger: Ledger) -> None:
    agent = ledger.register_agent("switched")
    changed = agent.change_tools([], ["remember", "recall"], KNOWN, by="test")
    assert changed is not None and changed.disabled == ["recall", "remember"]
    assert agent.change_tools([], ["remember"], KNOWN, by="test") is None  # already disabled
    assert agent.change_tools(["log_decision"], [], KNOWN, by="test") is None  # not disabled
    with pytest.raises(UnknownTools, match="has no tool 'nope'; its tools: log_decision"):
        agent.change_tools([], ["nope"], KNOWN, by="test")
    with pytest.raises(ValueError, match="both enabled and disabled: recall"):
        agent.change_tools(["recall"], ["recall"], KNOWN, by="test")
    assert (
        agent.change_tools(["remember"], [], ["recall"], by="test") is not None
    )  # gone from the app
    ledger.append(agent)
    loaded = ledger.load_agent("switched")
    assert loaded.disabled_tools == {"recall"}
    snapshot = msgspec.json.decode(
        msgspec.json.encode(Agent.Snapshot.take(loaded)), type=Agent.Snapshot
    )
    assert snapshot.restore().disabled_tools == {"recall"}


def test_a_disabled_tool_is_hidden_and_refused_until_enabled(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "operated", models=["x"])
    remember = {"tool_calls": [call("remember", content="kept?")]}
    play(runtime, [{"content": "first run"}])
    change = change_tools_directly(ledger, "operated", KNOWN, [], ["remember"], "local:ann")
    assert change.disabled == ["remember"] and change.position is not None
    disabled = run_events(ledger, play(runtime, [remember, {"content": "ok"}]))
    [visible] = [e for e in disabled if isinstance(e, ev.VisibleToolsResolved)]
    assert "remember" not in visible.tools
    assert visible.filtered == {"remember": OPERATOR_DISABLED}
    [denied] = [e for e in disabled if isinstance(e, ev.ToolCallDenied)]
    assert (denied.tool, denied.reason) == ("remember", OPERATOR_DISABLED)
    assert not any(isinstance(e, ev.MemoryRemembered) for e in disabled)

    enabled = asyncio.run(
        runtime.inbox.change_tools(
            ChangeTools(agent_id=runtime.agent_id, enable=["remember"], disable=[], by="ann")
        )
    )  # as the agent's writer
    assert enabled.disabled == [] and enabled.position is not None
    again = run_events(ledger, play(runtime, [remember, {"content": "ok"}]))
    [visible] = [e for e in again if isinstance(e, ev.VisibleToolsResolved)]
    assert "remember" in visible.tools and visible.filtered == {}
    assert any(isinstance(e, ev.MemoryRemembered) for e in again)
    changes = [e for e in agent_events(ledger, "operated") if isinstance(e, ev.ToolsChanged)]
    assert [(c.enabled, c.disabled, c.by) for c in changes] == [
        ([], ["remember"], "local:ann"),
        (["remember"], [], "ann"),
    ]


def test_an_unknown_tool_name_records_nothing(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "careful", models=["x"])
    play(runtime, [{"content": "first run"}])
    version = ledger.load_agent("careful").version
    with pytest.raises(UnknownTools, match="has no tool 'nope'"):
        asyncio.run(
            runtime.inbox.change_tools(
                ChangeTools(agent_id="careful", enable=[], disable=["nope"], by="test")
            )
        )
    assert ledger.load_agent("careful").version == version


def test_a_change_commits_over_a_fact_another_writer_appended_meanwhile(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = AgentRuntime(ledger, "busy", models=["x"])
    play(runtime, [{"content": "first run"}])
    head = ledger.chains.stream_head

    def looked_up_then_a_run_schedules(stream: Any) -> Any:
        """What the writer sees of the agent's stream, just before another runtime's run
        commits a schedule (one time)."""
        monkeypatch.setattr(ledger.chains, "stream_head", head)
        seen, other = head(stream), ledger.load_agent("busy")
        other.record(ev.ScheduleRequested, schedule_id="s1", kind="once", focus="later")
        ledger.append(other)
        return seen

    monkeypatch.setattr(ledger.chains, "stream_head", looked_up_then_a_run_schedules)
    change = asyncio.run(
        runtime.inbox.change_tools(
            ChangeTools(agent_id="busy", enable=[], disable=["remember"], by="test")
        )
    )
    assert change.disabled == ["remember"]
    agent = ledger.load_agent("busy")
    assert agent.disabled_tools == {"remember"} and "s1" in agent.state.schedules
