"""Erasure (``owlclaw erase``): record who erased what and why on the agent's stream
(DataErased), then destroy the data keys the content was sealed under (``events.sealing``).

The events stay where they are, so every hash chain still verifies; what they sealed reads as
``[erased]`` from then on. Erasing a memory destroys its own key; a run, the run's key (its
focus, payload, model messages, tool arguments and results, answer); an agent, every key of
the agent, its runs and its memories.
"""

from __future__ import annotations

from uuid import UUID

from events import catalog as ev
from events.catalog import ErasureKind
from events.errors import LedgerError
from events.keys import KeyRecord, key_id_of
from events.ledger import Ledger
from events.streams import agent_stream_id


class NothingToErase(LedgerError):
    """The memory, run or agent named has no live data key: unknown, recorded unencrypted,
    or already erased."""


def erase(
    ledger: Ledger, kind: ErasureKind, target: str, reason: str, by: str
) -> tuple[str, ev.DataErased]:
    """Record the erasure of ``target`` and destroy its keys; its agent and the DataErased."""
    if not reason.strip():
        raise ValueError("an erasure needs a reason")
    records = [r for r in _keys_of(ledger, kind, target) if ledger.sealer.keys.get(r.key_id)]
    if not records:
        raise NothingToErase(
            f"{kind} {target} has no data key to destroy: it is unknown, was recorded without "
            "encryption, or was already erased"
        )
    agent_id = _agent_id(ledger, kind, target, records)
    agent = ledger.load_agent(agent_id)
    erased = agent.record(
        ev.DataErased,
        kind=kind,
        target=target,
        keys=[r.key_id for r in records],
        memory_ids=[r.scope_id for r in records if r.scope == "memory"],
        reason=reason,
        by=by,
    )
    ledger.append_rebasing(agent)
    ledger.sealer.keys.destroy([r.key_id for r in records], by, reason)
    assert isinstance(erased, ev.DataErased)
    return agent_id, erased


def memory_keys(ledger: Ledger, memory_ids: list[UUID]) -> list[UUID]:
    """The data keys of ``memory_ids``, live or already destroyed (a memory recorded without
    encryption has none): what deleting those memories destroys."""
    ids = [key_id_of("memory", m) for m in memory_ids]
    return [r.key_id for r in ledger.sealer.keys.records(key_ids=ids)]


def _keys_of(ledger: Ledger, kind: ErasureKind, target: str) -> list[KeyRecord]:
    keys = ledger.sealer.keys
    if kind == "agent":
        ledger.require_agent(target)
        return keys.records(agent=agent_stream_id(target))
    try:
        scope_id = UUID(target)
    except ValueError:
        raise NothingToErase(f"{target!r} is not a {kind} id (a UUID)") from None
    return keys.records(key_ids=[key_id_of(kind, scope_id)])


def _agent_id(ledger: Ledger, kind: ErasureKind, target: str, records: list[KeyRecord]) -> str:
    """The agent whose stream records the erasure."""
    if kind == "agent":
        return target
    stream = records[0].agent
    if stream is None:  # a run key made by an event that does not name its agent
        started = ledger.stream(UUID(target))[0]
        assert isinstance(started, ev.RunStarted)
        return started.agent_id
    registered = ledger.stream(stream)[0]
    assert isinstance(registered, ev.AgentRegistered)
    return registered.agent_id
