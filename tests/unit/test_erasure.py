"""Erasure on the in-memory ledger: DataErased says who, why and what; the erased content reads
as ``[erased]`` while everything else reads as it was, and the chains still verify."""

from __future__ import annotations

import uuid

import pytest

from events import Ledger
from events import catalog as ev
from events.erasure import NothingToErase, erase
from events.keys import key_id_of
from events.run import Run
from events.sealing import ERASED_TEXT, ERASED_VALUE
from events.streams import agent_stream_id


def _run_with_memory(ledger: Ledger, agent_id: str, focus: str) -> tuple[uuid.UUID, uuid.UUID]:
    agent = ledger.register_agent(agent_id)
    run = Run.start(agent_id, agent.queue_run("webhook", focus, {"who": focus}))
    run.record(ev.LLMResponded, model="m", message={"content": f"about {focus}"})
    memory_id = uuid.uuid4()
    run.record(ev.MemoryRemembered, agent_id=agent_id, memory_id=memory_id, content=f"{focus} m")
    run.end(ev.RunCompleted, answer=f"done {focus}")
    ledger.seal(agent, run)
    ledger.append(agent, run)
    return run.id, memory_id


def _memory(ledger: Ledger, run_id: uuid.UUID) -> ev.MemoryRemembered:
    return next(e for e in ledger.stream(run_id) if isinstance(e, ev.MemoryRemembered))


def test_erasing_a_memory_erases_its_content_only_and_the_chains_verify() -> None:
    ledger = Ledger.in_memory()
    run_id, memory_id = _run_with_memory(ledger, "a", "Alice")
    agent_id, erased = erase(ledger, "memory", str(memory_id), "GDPR art. 17", "dpo")
    assert agent_id == "a"
    assert (erased.kind, erased.reason, erased.by) == ("memory", "GDPR art. 17", "dpo")
    assert erased.memory_ids == [memory_id]
    assert _memory(ledger, run_id).content == ERASED_TEXT
    started = ledger.stream(run_id)[0]
    assert isinstance(started, ev.RunStarted) and started.focus == "Alice"
    assert ledger.chains.verify().ok
    assert isinstance(ledger.stream(erased.originator_id)[-1], ev.DataErased)


def test_erasing_a_run_erases_its_focus_messages_and_answer_but_not_its_memory() -> None:
    ledger = Ledger.in_memory()
    run_id, _ = _run_with_memory(ledger, "a", "Alice")
    erase(ledger, "run", str(run_id), "asked", "dpo")
    started, responded, memory, completed = ledger.stream(run_id)
    assert isinstance(started, ev.RunStarted) and started.focus == ERASED_TEXT
    assert started.payload == ERASED_VALUE
    assert isinstance(responded, ev.LLMResponded) and responded.message == ERASED_VALUE
    assert isinstance(completed, ev.RunCompleted) and completed.answer == ERASED_TEXT
    assert isinstance(memory, ev.MemoryRemembered) and memory.content == "Alice m"
    assert ledger.chains.verify().ok


def test_erasing_an_agent_erases_every_run_and_memory_of_it_and_no_other_agent() -> None:
    ledger = Ledger.in_memory()
    run_a, _ = _run_with_memory(ledger, "a", "Alice")
    run_b, _ = _run_with_memory(ledger, "b", "Bob")
    _, erased = erase(ledger, "agent", "a", "account closed", "dpo")
    assert len(erased.keys) == 3 and len(erased.memory_ids) == 1  # agent, run, memory
    assert _memory(ledger, run_a).content == ERASED_TEXT
    assert _memory(ledger, run_b).content == "Bob m"
    assert ledger.chains.verify().ok


def test_erasing_twice_or_an_unknown_id_is_refused() -> None:
    ledger = Ledger.in_memory()
    _, memory_id = _run_with_memory(ledger, "a", "Alice")
    erase(ledger, "memory", str(memory_id), "r", "dpo")
    with pytest.raises(NothingToErase, match="already erased"):
        erase(ledger, "memory", str(memory_id), "r", "dpo")
    with pytest.raises(NothingToErase, match="not a run id"):
        erase(ledger, "run", "nope", "r", "dpo")
    with pytest.raises(ValueError, match="reason"):
        erase(ledger, "run", str(uuid.uuid4()), " ", "dpo")


def test_content_recorded_without_encryption_cannot_be_erased_and_says_so() -> None:
    ledger = Ledger.in_memory(encrypt=False)
    run_id, memory_id = _run_with_memory(ledger, "a", "Alice")
    with pytest.raises(NothingToErase, match="recorded without encryption"):
        erase(ledger, "memory", str(memory_id), "r", "dpo")
    assert _memory(ledger, run_id).content == "Alice m"


def test_an_agent_key_is_made_as_the_agent_registers_one_by_one_or_in_a_batch() -> None:
    ledger = Ledger.in_memory()
    ledger.register_agent("a")
    ledger.register_agents(["b", "c"])
    for agent_id in ("a", "b", "c"):
        stream = agent_stream_id(agent_id)
        records = ledger.sealer.keys.records(agent=stream)
        assert [(r.scope, r.scope_id) for r in records] == [("agent", stream)]
        assert ledger.sealer.keys.get(key_id_of("agent", stream)) is not None
    _, erased = erase(ledger, "agent", "b", "account closed", "dpo")  # nothing else sealed yet
    assert erased.keys == [key_id_of("agent", agent_stream_id("b"))]


def test_without_encryption_registering_makes_no_key() -> None:
    ledger = Ledger.in_memory(encrypt=False)
    ledger.register_agent("a")
    ledger.register_agents(["b"])
    assert ledger.sealer.keys.records() == []
