"""Who did it: an operator's trigger, inbound event and cancel record the principal (``by``);
what no operator did records None, and events stored before ``by`` was kept read as None."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.codec import MsgspecMapper
from events.streams import agent_stream_id
from owlclaw.audit.explain import explain_run
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Cancel, Receive, Result, Submit
from owlclaw.runtime import driver

CONFIG = OwlClawConfig(runtime=RuntimeConfig(models=("scripted/by-answers",)))


def _recorded(ledger: Ledger, agent_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(agent_stream_id(agent_id))


def test_a_submit_by_a_principal_records_it_on_the_run_queued() -> None:
    register_script("by-answers", [{"content": "done"}])
    ledger = Ledger.in_memory()
    ledger.register_agent("who")

    async def scenario() -> None:
        host = AgentHost(ledger, CONFIG)
        try:
            for message in (
                Submit(agent_id="who", trigger="webhook", by="alice"),
                Submit(agent_id="who", trigger="heartbeat"),
            ):
                run_id = await host.ask(message)
                await host.ask(Result(agent_id="who", run_id=run_id))
        finally:
            await host.close()

    asyncio.run(scenario())
    queued = [e for e in _recorded(ledger, "who") if isinstance(e, ev.RunQueued)]
    assert [(q.trigger, q.by) for q in queued] == [
        ("webhook", "alice"),
        ("heartbeat", None),
    ]


def test_an_inbound_event_records_who_posted_it() -> None:
    ledger = Ledger.in_memory()
    ledger.register_agent("who")

    async def scenario() -> None:
        host = AgentHost(ledger, CONFIG)
        try:
            await host.ask(Receive(agent_id="who", source="feed", payload={}, by="bob"))
        finally:
            await host.close()

    asyncio.run(scenario())
    events = _recorded(ledger, "who")
    assert [e.by for e in events if isinstance(e, ev.InboundReceived)] == ["bob"]


def test_a_cancel_by_a_principal_records_it_and_explain_shows_who(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = Ledger.in_memory()
    ledger.register_agent("who")
    asking = asyncio.Event()

    async def model_that_never_answers(*_: Any, **__: Any) -> Any:
        asking.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(driver, "ask", model_that_never_answers)

    async def scenario() -> str:
        host = AgentHost(ledger, CONFIG)
        try:
            run_id = await host.ask(Submit(agent_id="who", trigger="webhook", by="alice"))
            await asyncio.wait_for(asking.wait(), 10)  # the run is inside its model call
            assert await host.ask(Cancel(agent_id="who", run_id=run_id, by="carol"))
            result = await host.ask(Result(agent_id="who", run_id=run_id))
            assert result.status == "terminated"
            return run_id
        finally:
            await host.close()

    run_id = asyncio.run(scenario())
    ended = ledger.stream(uuid.UUID(run_id))[-1]
    assert isinstance(ended, ev.RunTerminated)
    assert (ended.reason, ended.by) == ("cancelled", "carol")
    manifest = explain_run(ledger, "who", 1)  # what `owlclaw explain` shows
    assert (manifest.triggered_by, manifest.ended) == ("alice", "terminated: cancelled by carol")


def _without_by(event: ev.LedgerEvent) -> ev.LedgerEvent:
    """``event`` as a release that did not keep ``by`` stored it."""
    mapper = MsgspecMapper()
    stored = mapper.to_stored_event(event)
    state = msgspec.json.decode(stored.state)
    del state["by"]
    old = StoredEvent(
        stored.originator_id, stored.originator_version, stored.topic, msgspec.json.encode(state)
    )
    return mapper.to_domain_event(old)


@pytest.mark.parametrize(
    "event",
    [
        ev.RunQueued(
            originator_id=uuid.uuid4(),
            originator_version=2,
            timestamp=datetime.now(UTC),
            run_id=uuid.uuid4(),
            run_no=1,
            trigger="webhook",
            by="alice",
        ),
        ev.RunTerminated(
            originator_id=uuid.uuid4(),
            originator_version=3,
            timestamp=datetime.now(UTC),
            reason="cancelled",
            by="alice",
        ),
    ],
)
def test_an_event_stored_before_by_was_kept_decodes_with_no_one(event: ev.LedgerEvent) -> None:
    old = _without_by(event)
    assert type(old) is type(event) and getattr(old, "by", "missing") is None
