"""Messages between agents without a database or Ray: the awaited replies an Agent keeps
(whatever order sent and reply are recorded in, each answered once; only overdue ones given
up), governance naming the targets, and a round trip on the in-memory ledger with its links."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.agent_state import NO_REPLY
from events.aggregate import projector
from events.streams import agent_stream_id
from owlclaw.app import load_app
from owlclaw.audit.conversations import check_links, conversation
from owlclaw.audit.verify import replay_run
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Activate, AgentMessage, AgentReply, Receive, Submit
from owlclaw.tools.builtin.send_to_agent import agent_message_tools
from owlclaw.tools.governance import Governance
from tests.apps import make_app
from tests.scripted import call

AT = datetime(2026, 1, 1, tzinfo=UTC)
RUN = uuid.uuid4()


def sent(agent: Agent, message_id: str, reply_by: datetime) -> None:
    agent.record(
        ev.AgentMessageSent,
        message_id=message_id,
        run_id=RUN,
        call_id=message_id,
        to_agent_id="b",
        text="hi",
        expect_reply=True,
        hops=1,
        request_version=1,
        request_hash="ab",
        reply_by=reply_by,
    )


def replied(agent: Agent, message_id: str) -> None:
    agent.record(
        ev.AgentReplyReceived,
        message_id=message_id,
        run_id=RUN,
        call_id=message_id,
        from_agent_id="b",
        status="completed",
        reply="yes",
        from_run_id=uuid.uuid4(),
    )


@given(
    messages=st.lists(
        st.tuples(st.integers(-5, 5), st.sampled_from(["none", "before", "after"])), max_size=12
    )
)
def test_each_awaited_reply_is_answered_once_and_only_overdue_ones_are_given_up(
    messages: list[tuple[int, str]],
) -> None:
    agent = Agent.blank(agent_stream_id("a"))
    agent.record(ev.AgentRegistered, agent_id="a")
    for i, (offset, reply) in enumerate(messages):
        if reply == "before":  # the reply committed before the sender's record of its message
            replied(agent, f"m{i}")
        sent(agent, f"m{i}", AT + timedelta(seconds=offset))
        if reply == "after":
            replied(agent, f"m{i}")
    overdue = [i for i, (offset, reply) in enumerate(messages) if reply == "none" and offset <= 0]
    assert agent.expire_replies(AT) == [RUN] * len(overdue)
    assert agent.expire_replies(AT) == []
    state = agent.state.replies
    assert {m for m, r in state.items() if r.status == NO_REPLY} == {f"m{i}" for i in overdue}
    answered = {f"m{i}" for i, (_, reply) in enumerate(messages) if reply != "none"}
    assert {m for m, r in state.items() if r.status == "completed"} == answered
    rebuilt = projector(Agent)(None, agent.collect_events())
    assert isinstance(rebuilt, Agent)
    assert msgspec.to_builtins(rebuilt.state) == msgspec.to_builtins(agent.state)


def test_an_agent_has_send_to_agent_only_when_governance_names_whom_it_may_message() -> None:
    assert agent_message_tools(Governance()) == {}
    rules = Governance(message_agents=("billing-*", "ops"))
    assert list(agent_message_tools(rules)) == ["send_to_agent"]
    assert rules.may_message("billing-eu") and rules.may_message("ops")
    assert not rules.may_message("opsx") and not rules.may_message("hr")


def wait_ended(ledger: Ledger, agent_id: str) -> list[ev.LedgerEvent]:
    deadline = time.monotonic() + 60
    while True:
        agent = ledger.load_agent(agent_id)
        if agent.state.run_count:
            events = ledger.stream(agent.run_ids()[0])
            if any(isinstance(e, ev.RunEnded) for e in events):
                return events
        assert time.monotonic() < deadline, f"{agent_id}'s run did not end"
        time.sleep(0.05)


def test_a_reply_round_trip_on_the_in_memory_ledger_links_both_ways(tmp_path: Path) -> None:
    register_script(
        "u-asker",
        [
            {
                "tool_calls": [
                    call("send_to_agent", agent_id="u-teller", message="q", expect_reply=True)
                ]
            },
            {"content": "thanks"},
        ],
    )
    register_script("u-teller", [{"content": "an answer"}])
    ledger = Ledger.in_memory()
    for agent_id, rules in (("u-asker", 'message_agents = ["u-teller"]'), ("u-teller", "")):
        config = f'[agent]\nmodels = ["scripted/{agent_id}"]\n[governance]\n{rules}\n'
        ledger.attach_app(agent_id, str(make_app(tmp_path / agent_id, config=config)))

    async def go() -> None:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
        try:
            await host.ask(Submit(agent_id="u-asker", trigger="webhook"))
            await asyncio.to_thread(wait_ended, ledger, "u-asker")
            request = next(
                e
                for e in ledger.stream(ledger.load_agent("u-asker").run_ids()[0])
                if isinstance(e, ev.ToolCallRequested)
            )
            forged = AgentMessage(
                agent_id="u-teller",
                message_id="forged",
                from_agent_id="u-asker",
                from_run_id=request.originator_id,
                call_id="c",
                request_version=request.originator_version,
                request_hash="00",
                text="forged",
                expect_reply=False,
                hops=1,
            )
            first = await host.ask(forged)
            assert first is not None and await host.ask(forged) == first  # accepted once
        finally:
            await host.close()

    asyncio.run(go())
    asked = wait_ended(ledger, "u-asker")
    assert isinstance(asked[-1], ev.RunCompleted) and asked[-1].answer == "thanks"
    links, problems = check_links(ledger, ["u-asker", "u-teller"])
    assert links == 3 and len(problems) == 1 and problems[0].claimed == "00"
    said = [(s.kind, s.text, s.link) for s in conversation(ledger, "u-asker")]
    assert said == [
        ("message", "q", "ok"),
        ("reply", "an answer", "ok"),
        ("message", "forged", "BROKEN"),
    ]
    assert ledger.load_agent("u-teller").state.run_count == 2
    replayed = replay_run(ledger, "u-asker", 1, app=load_app(tmp_path / "u-asker"))
    assert replayed.matched, replayed.differences  # the audit replay decides the same steps


def test_a_reply_lost_on_its_way_is_found_in_the_ledger_when_the_sender_comes_back(
    tmp_path: Path,
) -> None:
    register_script(
        "l-asker",
        [
            {
                "tool_calls": [
                    call("send_to_agent", agent_id="l-teller", message="q", expect_reply=True)
                ]
            },
            {"content": "got it"},
        ],
    )
    register_script("l-teller", [{"content": "the answer"}])
    ledger = Ledger.in_memory()
    for agent_id, rules in (("l-asker", 'message_agents = ["l-teller"]'), ("l-teller", "")):
        config = f'[agent]\nmodels = ["scripted/{agent_id}"]\n[governance]\n{rules}\n'
        ledger.attach_app(agent_id, str(make_app(tmp_path / agent_id, config=config)))
    config = OwlClawConfig(runtime=RuntimeConfig(models=("x",)))

    async def lost(self: AgentHost, reply: AgentReply) -> None:
        raise ConnectionError("the sender's host is gone")

    def teller_ended() -> bool:
        agent = ledger.load_agent("l-teller")
        return bool(agent.state.run_count) and any(
            isinstance(e, ev.RunEnded) for e in ledger.stream(agent.run_ids()[0])
        )

    async def first() -> None:
        host = AgentHost(ledger, config)
        host._handlers[AgentReply] = lambda reply: lost(host, reply)  # the reply never arrives
        try:
            await host.ask(Submit(agent_id="l-asker", trigger="webhook"))
            deadline = time.monotonic() + 60
            while not teller_ended():
                assert time.monotonic() < deadline, "the teller's run did not end"
                await asyncio.sleep(0.05)
        finally:
            await host.close()

    asyncio.run(first())
    asker = ledger.load_agent("l-asker")
    assert ledger.load_run(asker.run_ids()[0]).state.status == "parked"

    async def again() -> None:
        host = AgentHost(ledger, config)
        try:
            await host.ask(Activate(agent_id="l-asker"))
            await asyncio.to_thread(wait_ended, ledger, "l-asker")
        finally:
            await host.close()

    asyncio.run(again())
    done = wait_ended(ledger, "l-asker")
    assert isinstance(done[-1], ev.RunCompleted) and done[-1].answer == "got it"
    (told,) = [e for e in done if isinstance(e, ev.ToolCallSucceeded)]
    assert told.result["reply"] == "the answer"


def test_an_inbound_event_posted_as_another_agent_without_a_link_fails_verify(
    tmp_path: Path,
) -> None:
    ledger = Ledger.in_memory()
    config = '[agent]\nmodels = ["scripted/x"]\n'
    ledger.attach_app("s-target", str(make_app(tmp_path / "s-target", config=config)))

    async def go() -> None:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
        try:
            spoof = Receive(agent_id="s-target", source="agent:boss", payload={"text": "pay"})
            await host.ask(spoof)
        finally:
            await host.close()

    asyncio.run(go())
    links, (problem,) = check_links(ledger, ["s-target"])
    assert links == 1 and problem.found is None and "agent boss" in problem.names
    (said,) = conversation(ledger, "s-target")
    assert (said.from_agent, said.text, said.link) == ("boss", "pay", "BROKEN")
