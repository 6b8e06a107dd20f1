"""Hash chains: any change to a stored byte, a removed or a reordered event is reported."""

from __future__ import annotations

from uuid import UUID, uuid4

from hypothesis import given
from hypothesis import strategies as st

from events.hashchain import GENESIS_HASH, Row, row_hash, verify_rows


def chain(stream: UUID, payloads: list[bytes], first_position: int = 1) -> list[Row]:
    rows: list[Row] = []
    prev = GENESIS_HASH
    for i, state in enumerate(payloads, start=1):
        h = row_hash(prev, stream, i, "T", state)
        rows.append((stream, i, "T", state, first_position + i - 1, prev, h))
        prev = h
    return rows


payloads = st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=12)


@given(payloads)
def test_an_untouched_chain_verifies(states: list[bytes]) -> None:
    report = verify_rows(chain(uuid4(), states))
    assert report.ok and report.events == len(states) and report.streams == 1


@given(payloads, st.data())
def test_changing_any_byte_is_reported_at_that_event(
    states: list[bytes], data: st.DataObject
) -> None:
    rows = chain(uuid4(), states)
    k = data.draw(st.integers(0, len(rows) - 1))
    stream, version, topic, state, pos, prev, h = rows[k]
    i = data.draw(st.integers(0, len(state) - 1))
    altered = state[:i] + bytes([state[i] ^ 0x01]) + state[i + 1 :]
    rows[k] = (stream, version, topic, altered, pos, prev, h)
    report = verify_rows(rows)
    assert [(b.stream, b.version) for b in report.breaks] == [(stream, version)]


@given(st.lists(st.binary(min_size=1, max_size=8), min_size=3, max_size=10), st.data())
def test_a_removed_event_is_reported_at_its_successor(
    states: list[bytes], data: st.DataObject
) -> None:
    rows = chain(uuid4(), states)
    k = data.draw(st.integers(0, len(rows) - 2))
    successor = rows[k + 1]
    del rows[k]
    report = verify_rows(rows)
    assert [b.version for b in report.breaks] == [successor[1]]


def test_a_rewritten_hash_is_caught_by_the_next_event() -> None:
    stream = uuid4()
    rows = chain(stream, [b"a", b"b", b"c"])
    s, v, t, _, pos, prev, _ = rows[1]
    forged = b"forged"
    rows[1] = (s, v, t, forged, pos, prev, row_hash(prev, s, v, t, forged))
    report = verify_rows(rows)
    assert [b.version for b in report.breaks] == [3]
    assert "previous event" in report.breaks[0].reason
