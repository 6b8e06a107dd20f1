"""Agent snapshots hold no plaintext: the approvals' arguments, sub-agents' answers and
schedules' focus the agent's state copies are stored sealed under their events' keys, restore
as they were, and read ``[erased]`` once those keys are destroyed."""

from __future__ import annotations

import uuid

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.erasure import erase
from events.run import Run
from events.sealing import ERASED_TEXT, ERASED_VALUE

SECRETS = {
    "arguments": "iban-DE00-1234",
    "edited": "iban-DE00-9999",
    "answer": "Alice owes 300",
    "focus": "remind Alice of her rent",
}


def _agent_with_content(ledger: Ledger) -> tuple[Agent, uuid.UUID]:
    """An agent whose state holds each kind of sealed content, and the run that made it."""
    agent = ledger.register_agent("a")
    run = Run.start("a", agent.queue_run("webhook", "pay rent"))
    ledger.append(agent, run)
    agent.request_approval(run.id, "c1", "pay", {"to": SECRETS["arguments"]}, "ask", [], 3600)
    agent.request_approval(run.id, "c2", "pay", {"to": "x"}, "ask", [], 3600)
    approval_id = next(iter(agent.state.approvals))
    digest = agent.state.approvals[approval_id].shown()[1]
    agent.answer_approval(
        approval_id, True, "op", arguments={"to": SECRETS["edited"]}, digest=digest
    )
    agent.record(
        ev.SubAgentFinished,
        spawn_id="s1",
        run_id=run.id,
        call_id="c3",
        child_agent_id="b",
        child_run_id=uuid.uuid4(),
        wait=True,
        status="completed",
        answer=SECRETS["answer"],
    )
    agent.record(
        ev.ScheduleRequested,
        schedule_id="sch",
        kind="cron",
        cron="0 9 * * *",
        focus=SECRETS["focus"],
        owner_run_id=run.id,
        agent_id="a",
    )
    ledger.append(agent)
    return agent, run.id


def _contents(agent: Agent) -> dict[str, object]:
    state = agent.state
    first, *_ = state.approvals.values()
    return {
        "arguments": first.arguments,
        "edited": first.edited_arguments,
        "answer": state.spawns["s1"].answer,
        "focus": state.schedules["sch"].focus,
    }


def test_a_snapshot_stores_the_sealed_content_of_the_state_and_restores_it() -> None:
    ledger = Ledger.in_memory(snapshot_interval=2)
    agent, _ = _agent_with_content(ledger)
    stored = ledger._mapper.to_stored_event(Agent.Snapshot.take(agent))
    for secret in SECRETS.values():
        assert secret.encode() not in stored.state
    restored = ledger._mapper.to_domain_event(stored).restore()
    assert _contents(restored) == _contents(agent)
    loaded = ledger.load_agent("a")  # from the snapshot the ledger took, and the tail
    assert _contents(loaded) == {
        "arguments": {"to": SECRETS["arguments"]},
        "edited": {"to": SECRETS["edited"]},
        "answer": SECRETS["answer"],
        "focus": SECRETS["focus"],
    }


def test_after_the_run_is_erased_a_snapshot_restores_its_content_as_erased() -> None:
    ledger = Ledger.in_memory(snapshot_interval=2)
    agent, run_id = _agent_with_content(ledger)
    erase(ledger, "run", str(run_id), "GDPR art. 17", "dpo")
    stored = ledger._mapper.to_stored_event(Agent.Snapshot.take(agent))  # held before
    for secret in SECRETS.values():
        assert secret.encode() not in stored.state
    for restored in (ledger._mapper.to_domain_event(stored).restore(), ledger.load_agent("a")):
        assert _contents(restored) == {
            "arguments": ERASED_VALUE,
            "edited": {"to": SECRETS["edited"]},  # under the agent's key: not the run's
            "answer": ERASED_TEXT,
            "focus": ERASED_TEXT,
        }
