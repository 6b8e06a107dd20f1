"""The agent as its writer last saw it stored stands in for loading it (a head lookup instead of
snapshot + tail, twice a run), only while nobody else has appended to its stream."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Agent, Ledger
from events import catalog as ev
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.fencing import AgentWriter
from tests.scripted import play, run_script


def _record(agent: Agent, op: str, n: int) -> None:
    if op == "run":
        agent.queue_run("webhook", focus=f"run {n}", payload={"n": n})
    elif op == "inbound":
        agent.record(ev.InboundReceived, source="market", payload={"price": n})
    elif op == "tools":
        off = "recall" if "recall" not in agent.state.disabled_tools else "remember"
        agent.change_tools([], [off], ["recall", "remember"], by="test")
    else:
        agent.record(
            ev.ScheduleRequested,
            schedule_id=f"sch_{n}",
            kind="once",
            focus="later",
            agent_id=agent.agent_id,
            delay_seconds=60 + n,
            fire_at=datetime.now(UTC) + timedelta(seconds=60 + n),
        )


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["run", "inbound", "tools", "schedule"]), st.booleans()),
        max_size=12,
    )
)
def test_what_the_writer_saw_is_what_loading_gives_and_a_foreign_append_voids_it(
    steps: list[tuple[str, bool]],
) -> None:
    with Ledger.in_memory() as ledger:
        writer = AgentWriter(ledger)
        assert writer.current("a") is None  # nothing seen yet: the caller loads
        writer.seen(ledger.register_agent("a"))
        for n, (op, foreign) in enumerate(steps):
            if foreign:  # another writer (the timer service, a person's answer) appends first
                other = ledger.load_agent("a")
                _record(other, "inbound", n)
                ledger.append(other)
                assert writer.current("a") is None
                writer.seen(ledger.load_agent("a"))
            agent = writer.current("a")
            assert agent is not None
            _record(agent, op, n)
            writer.append(agent)
            current, loaded = writer.current("a"), ledger.load_agent("a")
            assert current is not None and current is not agent
            assert (current.version, current.state) == (loaded.version, loaded.state)


def test_an_agent_with_uncommitted_events_is_not_taken_for_the_stored_one(ledger: Ledger) -> None:
    writer = AgentWriter(ledger)
    agent = ledger.register_agent("a")
    agent.queue_run("webhook")
    writer.seen(agent)
    assert writer.current("a") is None


def test_a_fact_another_writer_appends_between_runs_reaches_the_next_run(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "watcher", models=["scripted/none"])
    assert play(runtime, [{"content": "nothing to watch yet"}]).status == "completed"
    idle = run_script(runtime, "idle", [{"content": "unused"}], trigger="heartbeat")
    assert idle.status == "skipped"  # nothing arrived: no model call
    other = ledger.load_agent("watcher")
    other.record(ev.InboundReceived, source="market", payload={"price": 101})
    ledger.append(other)
    woken = run_script(runtime, "woken", [{"content": "saw the price"}], trigger="heartbeat")
    assert woken.status == "completed"


def test_a_runtime_given_the_agent_its_host_just_loaded_does_not_load_it_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host activating an agent loads it (interrupted runs, queued runs); its runtime takes
    that agent, checked by its stream's head, instead of loading it a second time."""
    ledger.register_agent("activated")
    loaded = ledger.load_agent("activated")
    runtime = AgentRuntime(ledger, "activated", models=["scripted/none"])
    loads: list[str] = []
    load_agent = ledger.load_agent

    def counted(agent_id: str) -> Agent:
        loads.append(agent_id)
        return load_agent(agent_id)

    monkeypatch.setattr(ledger, "load_agent", counted)
    try:
        asyncio.run(runtime.inbox.load(loaded))
        assert loads == []
        assert play(runtime, [{"content": "first run after activation"}]).status == "completed"
        assert loads == []
        other = AgentRuntime(ledger, "activated", models=["scripted/none"])
        asyncio.run(other.inbox.load())  # nothing given: loaded
        assert loads == ["activated"]
        other.close()
    finally:
        runtime.close()
