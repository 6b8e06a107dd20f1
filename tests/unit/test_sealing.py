"""Sealed content: every content field round-trips encrypted through the codec, the stored bytes
hold no plaintext, sealing is deterministic (a run's head is computed before it is stored), and
a destroyed key reads as the erased marker, never an error."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.catalog import EVENT_TYPES, LedgerEvent
from events.codec import CorruptEvent, MsgspecMapper
from events.keys import DataKey, InMemoryKeyStore, KeyDestroyed, key_id_of
from events.sealing import ERASED_TEXT, ERASED_VALUE, Sealer
from events.streams import agent_stream_id

AGENT = agent_stream_id("a")


def _mapper(encrypt: bool = True) -> tuple[MsgspecMapper, InMemoryKeyStore]:
    keys = InMemoryKeyStore()
    return MsgspecMapper(Sealer(keys, encrypt=encrypt)), keys


def _header(stream: UUID | None = None) -> dict[str, Any]:
    return {
        "originator_id": stream or uuid4(),
        "originator_version": 2,
        "timestamp": datetime.now(UTC),
    }


def _samples() -> list[LedgerEvent]:
    run = uuid4()
    return [
        ev.RunQueued(
            **_header(AGENT),
            run_id=run,
            run_no=1,
            trigger="t",
            focus="Alice's rent",
            payload={"iban": "DE00 1234"},
            context={"who": "Alice"},
        ),
        ev.RunStarted(
            **_header(run),
            agent_id="a",
            run_no=1,
            trigger="t",
            focus="Alice's rent",
            payload={"iban": "DE00 1234"},
        ),
        ev.LLMResponded(**_header(run), model="m", message={"content": "Alice's rent is late"}),
        ev.ToolCallRequested(**_header(run), call_id="c", tool="t", arguments={"who": "Alice"}),
        ev.ToolCallSucceeded(**_header(run), call_id="c", tool="t", result={"iban": "DE00 1234"}),
        ev.ToolCallSucceeded(**_header(run), call_id="c", tool="t", result="Alice's rent"),
        ev.ToolCallRejected(
            **_header(run), call_id="c", tool="t", error="e", arguments_text="{Alice"
        ),
        ev.DecisionLogged(**_header(run), decision_type="d", reasoning="Alice's rent"),
        ev.RunCompleted(**_header(run), answer="Alice's rent is paid"),
        ev.MemoryRemembered(
            **_header(run),
            agent_id="a",
            memory_id=uuid4(),
            content="Alice's rent is due on the 3rd",
        ),
        ev.InboundReceived(**_header(AGENT), source="s", payload={"who": "Alice"}),
        _schedule(owner_run_id=run),
        _schedule(owner_run_id=None),
        ev.ToolCallRequested(
            **_header(run),
            call_id="c",
            tool="t",
            arguments={"who": "Alice"},
            raw_arguments="{'who': 'Alice',}",
            repaired_arguments='{"who": "Alice"}',
        ),
    ]


def _schedule(owner_run_id: UUID | None) -> ev.ScheduleRequested:
    return ev.ScheduleRequested(
        **_header(AGENT),
        schedule_id="s",
        kind="once",
        focus="remind Alice of her rent",
        owner_run_id=owner_run_id,
        delay_seconds=60,
    )


def test_a_schedule_focus_is_sealed_under_its_run_key_or_the_agent_key_without_one() -> None:
    run = uuid4()
    by_run, by_operator = _schedule(owner_run_id=run), _schedule(owner_run_id=None)
    assert by_run.data_key() == DataKey("run", run, AGENT)
    assert by_operator.data_key() == DataKey("agent", AGENT, AGENT)
    mapper, keys = _mapper()
    stored = mapper.to_stored_event(by_run)
    keys.destroy([key_id_of("run", run)], "op", "the run was erased")
    decoded = mapper.to_domain_event(stored)
    assert isinstance(decoded, ev.ScheduleRequested) and decoded.focus == ERASED_TEXT


@pytest.mark.parametrize("event", _samples(), ids=lambda e: type(e).__name__)
def test_content_is_stored_sealed_and_read_back_as_it_was(event: LedgerEvent) -> None:
    mapper, _ = _mapper()
    stored = mapper.to_stored_event(event)
    assert b"Alice" not in stored.state and b"DE00" not in stored.state
    assert mapper.to_domain_event(stored) == event
    assert mapper.to_stored_event(event).state == stored.state  # deterministic


@pytest.mark.parametrize("event", _samples(), ids=lambda e: type(e).__name__)
def test_a_destroyed_key_reads_as_erased(event: LedgerEvent) -> None:
    mapper, keys = _mapper()
    stored = mapper.to_stored_event(event)
    ref = event.data_key()
    assert ref is not None
    assert keys.destroy([ref.key_id], "op", "GDPR request") == 1
    decoded = mapper.to_domain_event(stored)
    for field in event.sealed:
        before, after = getattr(event, field), getattr(decoded, field)
        if before:
            assert after == (ERASED_TEXT if isinstance(before, str) else ERASED_VALUE)
    with pytest.raises(KeyDestroyed):
        mapper.to_stored_event(event)


def test_with_encryption_off_content_is_stored_plain_and_sealed_content_still_opens() -> None:
    keys = InMemoryKeyStore()
    event = _samples()[1]
    sealed = MsgspecMapper(Sealer(keys)).to_stored_event(event)
    plain_mapper = MsgspecMapper(Sealer(keys, encrypt=False))
    assert b"Alice" in plain_mapper.to_stored_event(event).state
    assert plain_mapper.to_domain_event(sealed) == event


def test_plaintext_events_written_before_encryption_still_read() -> None:
    event = _samples()[2]
    old = MsgspecMapper().to_stored_event(event)
    mapper, _ = _mapper()
    assert mapper.to_domain_event(old) == event


def test_a_changed_ciphertext_is_a_corrupt_event_not_plaintext() -> None:
    mapper, _ = _mapper()
    stored = mapper.to_stored_event(_samples()[8])
    state = msgspec.json.decode(stored.state)
    body = state["answer"]
    state["answer"] = body[:-6] + ("AAAA==" if not body.endswith("AAAA==") else "BBBB==")
    changed = StoredEvent(
        stored.originator_id, stored.originator_version, stored.topic, msgspec.json.encode(state)
    )
    with pytest.raises(CorruptEvent):
        mapper.to_domain_event(changed)


def test_every_sealed_field_is_a_field_of_its_event() -> None:
    for cls in EVENT_TYPES.values():
        fields = set(cls.__struct_fields__)
        assert set(cls.sealed) <= fields, cls.__name__


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(content=st.text(min_size=1), result=json_values, erase=st.booleans())
def test_any_content_round_trips_and_a_destroyed_key_always_gives_the_marker(
    content: str, result: Any, erase: bool
) -> None:
    """Sealed content reads back as the same event stored in plaintext does (NUL as U+FFFD)."""
    mapper, keys = _mapper()
    plain = MsgspecMapper()
    run = uuid4()
    events: list[LedgerEvent] = [
        ev.RunCompleted(**_header(run), answer=content),
        ev.ToolCallSucceeded(**_header(run), call_id="c", tool="t", result=result),
    ]
    stored = [mapper.to_stored_event(e) for e in events]
    expected = [plain.to_domain_event(plain.to_stored_event(e)) for e in events]
    if erase:
        ref = events[0].data_key()
        assert ref is not None
        keys.destroy([ref.key_id], "op", "why")
    answer, succeeded = (mapper.to_domain_event(s) for s in stored)
    assert isinstance(answer, ev.RunCompleted) and isinstance(succeeded, ev.ToolCallSucceeded)
    assert answer.answer == (ERASED_TEXT if erase else expected[0].answer)  # type: ignore[attr-defined]
    empty = result is None or (isinstance(result, str | dict | list) and not result)
    if erase and not empty:
        assert succeeded.result == (ERASED_TEXT if isinstance(result, str) else ERASED_VALUE)
    else:
        assert succeeded.result == expected[1].result  # type: ignore[attr-defined]


def test_a_view_stores_what_the_ledger_stores() -> None:
    keys = InMemoryKeyStore()
    sealer = Sealer(keys)
    event = _samples()[2]
    assert sealer.stored(event, "message") == event.message  # no key: stored in plaintext
    stored = MsgspecMapper(sealer).to_stored_event(event)
    sealed = msgspec.json.decode(stored.state)["message"]
    assert sealer.stored(event, "message") == sealed
    assert Sealer(keys, encrypt=False).stored(event, "message") == sealed
    ref = event.data_key()
    assert ref is not None
    keys.destroy([ref.key_id], "op", "r")
    erased = MsgspecMapper(sealer).to_domain_event(stored)
    assert sealer.stored(erased, "message") == ERASED_VALUE


def test_nul_in_sealed_content_reads_back_as_u_fffd_as_in_plaintext_events() -> None:
    mapper, _ = _mapper()
    run = uuid4()
    answer = ev.RunCompleted(**_header(run), answer="a\x00b")
    result = ev.ToolCallSucceeded(**_header(run), call_id="c", tool="t", result={"o\x00": "x\x00"})
    plain = MsgspecMapper()
    for event in (answer, result):
        expected = plain.to_domain_event(plain.to_stored_event(event))
        assert mapper.to_domain_event(mapper.to_stored_event(event)) == expected


def test_an_event_prepared_for_its_append_is_sealed_once_and_stored_as_prepared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ledger.seal chains a run's pending events before their append: the append stores the
    very bytes chained, without redacting, sealing and encoding the event again."""
    mapper, _ = _mapper()
    event = _samples()[2]
    prepared = mapper.prepare(event)
    sealed: list[LedgerEvent] = []
    seal_event = Sealer.seal_event
    monkeypatch.setattr(
        Sealer, "seal_event", lambda self, e: sealed.append(e) or seal_event(self, e)
    )
    assert mapper.to_stored_event(event) == prepared
    assert sealed == []
    assert mapper.to_stored_event(event) == prepared  # stored again (a retried append): resealed
    assert sealed == [event]


def test_a_prepared_event_is_not_what_another_event_at_its_position_stores() -> None:
    mapper, _ = _mapper()
    event = _samples()[2]
    assert isinstance(event, ev.LLMResponded)
    mapper.prepare(event)
    other = msgspec.structs.replace(event, message={"content": "something else"})
    stored = mapper.to_stored_event(other)
    assert mapper.to_domain_event(stored) == other


class WarmedKeys(InMemoryKeyStore):
    """Keys that record what each ``warm`` asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.warmed: list[set[UUID]] = []

    def warm(self, key_ids: Collection[UUID]) -> None:
        self.warmed.append(set(key_ids))


def test_warming_a_batch_asks_once_for_every_key_its_envelopes_name() -> None:
    keys = WarmedKeys()
    mapper = MsgspecMapper(Sealer(keys))
    stored = [mapper.to_stored_event(e) for e in _samples()]
    made = {r.key_id for r in keys.records()}
    assert len(made) > 1
    assert mapper.sealer is not None
    mapper.sealer.warm(s.state for s in stored)
    assert keys.warmed == [made]
    mapper.sealer.warm([b'{"content": "plain"}'])  # nothing sealed: nothing asked
    assert keys.warmed == [made]
