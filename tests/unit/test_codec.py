"""The msgspec codec: round trips, versioned topics, upcasting, and clear decode errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar
from uuid import uuid4

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.catalog import EVENT_TYPES, LedgerEvent
from events.codec import (
    CorruptEvent,
    MsgspecMapper,
    NewerEventVersion,
    UnknownEventType,
    parse_topic,
    topic_of,
)

mapper = MsgspecMapper()


def _header() -> dict[str, Any]:
    return {"originator_id": uuid4(), "originator_version": 3, "timestamp": datetime.now(UTC)}


def test_every_catalog_event_round_trips_through_the_mapper() -> None:
    for name, cls in EVENT_TYPES.items():
        if name.startswith("Sample"):
            continue
        example = msgspec.convert({**_header(), **_required_fields(cls)}, cls)
        stored = mapper.to_stored_event(example)
        assert stored.topic == topic_of(cls)
        assert mapper.to_domain_event(stored) == example


def _required_fields(cls: type[LedgerEvent]) -> dict[str, Any]:
    """Minimal valid values for the fields without defaults."""
    values: dict[str, Any] = {}
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    for f in info.fields:
        if f.required and f.name not in {"originator_id", "originator_version", "timestamp"}:
            values[f.name] = _sample(f.type)
    return values


def _sample(t: msgspec.inspect.Type) -> Any:
    mapping = {
        msgspec.inspect.StrType: "x",
        msgspec.inspect.IntType: 1,
        msgspec.inspect.FloatType: 1.5,
        msgspec.inspect.BoolType: True,
        msgspec.inspect.UUIDType: str(uuid4()),
        msgspec.inspect.DateTimeType: datetime.now(UTC).isoformat(),
        msgspec.inspect.AnyType: {"k": [1, "two"]},
    }
    for kind, value in mapping.items():
        if isinstance(t, kind):
            return value
    if isinstance(t, msgspec.inspect.ListType):
        return [_sample(t.item_type)]
    if isinstance(t, msgspec.inspect.DictType):
        return {"k": _sample(t.value_type)}
    if isinstance(t, msgspec.inspect.UnionType):
        return _sample(t.types[0])
    if isinstance(t, msgspec.inspect.LiteralType):
        return t.values[0]
    if isinstance(t, msgspec.inspect.StructType):
        return {f.name: _sample(f.type) for f in t.fields if f.required}
    raise AssertionError(f"no sample for {t}")


@given(
    content=st.text(max_size=2000) | st.text(alphabet="\\u0\x00", max_size=40),
    tags=st.lists(st.text(max_size=20), max_size=5),
)
def test_memory_content_is_stored_verbatim_but_nul(content: str, tags: list[str]) -> None:
    """Text comes back as it was given, but for NUL characters, stored as U+FFFD so that
    PostgreSQL's jsonb can read every event (a literal backslash-u0000 stays as it was)."""
    event = ev.MemoryRemembered(
        **_header(), agent_id="a", memory_id=uuid4(), content=content, tags=tags
    )
    decoded = mapper.to_domain_event(mapper.to_stored_event(event))
    assert decoded.content == content.replace("\x00", "\ufffd")
    assert decoded.tags == [t.replace("\x00", "\ufffd") for t in tags]


def test_nul_in_keys_and_nested_values_is_stored_as_u_fffd() -> None:
    event = ev.InboundReceived(
        **_header(), source="a\x00", payload={"k\x00": ["\x00", {"\\u0000": "\\\x00"}]}
    )
    decoded = mapper.to_domain_event(mapper.to_stored_event(event))
    assert decoded.source == "a\ufffd"
    assert decoded.payload == {"k\ufffd": ["\ufffd", {"\\u0000": "\\\ufffd"}]}


class SampleRenamed(LedgerEvent, frozen=True, kw_only=True):
    """Version 2 of an event whose v1 stored ``text`` and no ``priority``."""

    stream: ClassVar[ev.Stream] = "run"
    class_version: ClassVar[int] = 2
    body: str
    priority: int

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["body"] = state.pop("text")
        state["priority"] = 0


def test_an_event_stored_as_v1_is_read_as_v2_through_its_upcaster() -> None:
    header = _header()
    v1_state = msgspec.json.encode({**header, "text": "stored before the class moved to v2"})
    stored = StoredEvent(header["originator_id"], 3, "SampleRenamed", v1_state)
    event = mapper.to_domain_event(stored)
    assert isinstance(event, SampleRenamed)
    assert event.body == "stored before the class moved to v2"
    assert event.priority == 0
    assert mapper.to_stored_event(event).topic == "SampleRenamed@2"


def test_topic_names_the_class_and_its_version() -> None:
    assert topic_of(ev.RunStarted) == "RunStarted"
    assert parse_topic("SampleRenamed@2") == ("SampleRenamed", 2)
    assert parse_topic("RunStarted") == ("RunStarted", 1)


def test_unknown_event_type_names_the_type_stream_and_version() -> None:
    oid = uuid4()
    with pytest.raises(UnknownEventType) as info:
        mapper.to_domain_event(StoredEvent(oid, 7, "FromTheFuture", b"{}"))
    assert "FromTheFuture" in str(info.value)
    assert str(oid) in str(info.value)
    assert "version 7" in str(info.value)


@pytest.mark.parametrize("payload", [b"{not json", b'{"originator_id": 5}', b"\xff\xfe"])
def test_corrupt_payload_names_the_stream_and_version(payload: bytes) -> None:
    oid = uuid4()
    with pytest.raises(CorruptEvent) as info:
        mapper.to_domain_event(StoredEvent(oid, 4, "RunStarted", payload))
    assert str(oid) in str(info.value)
    assert "version 4" in str(info.value)


def test_a_schedule_cancel_stored_before_it_named_who_decodes_with_no_one() -> None:
    stored = mapper.to_stored_event(
        ev.ScheduleCancelled(**_header(), schedule_id="s-1", reason="done", by="agent")
    )
    old_state = msgspec.json.decode(stored.state)
    del old_state["by"]
    old = StoredEvent(
        stored.originator_id,
        stored.originator_version,
        stored.topic,
        msgspec.json.encode(old_state),
    )
    decoded = mapper.to_domain_event(old)
    assert (decoded.schedule_id, decoded.reason, decoded.by) == ("s-1", "done", "")


def test_an_event_of_a_newer_class_version_is_refused_not_read_as_the_older_class() -> None:
    oid = uuid4()
    state = mapper.to_stored_event(ev.RunWarning(**_header(), source="s", message="m")).state
    with pytest.raises(NewerEventVersion) as info:
        mapper.to_domain_event(StoredEvent(oid, 5, "RunWarning@2", state))
    assert str(info.value) == (
        f"event RunWarning@2 in stream {oid} version 5 was written by a newer OwlClaw: this one"
        " reads RunWarning up to version 1; upgrade OwlClaw to read this ledger"
    )
