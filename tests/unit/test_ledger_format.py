"""The ledger format: what an OwlClaw can read of the format a ledger records, and the refusal
that names both sides."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.catalog import EVENT_TYPES
from events.ledger_format import (
    LEDGER_FORMAT,
    LedgerFormat,
    LedgerTooNew,
    is_newer,
    running_format,
    unreadable,
)
from tests.ledger_contract import SampleV1Moved

catalogs = st.dictionaries(st.sampled_from(sorted(EVENT_TYPES)), st.integers(1, 5), min_size=1)


def test_the_running_format_is_this_code_s_layout_and_its_own_event_classes() -> None:
    running = running_format()
    assert running.format == LEDGER_FORMAT
    assert running.events["RunStarted"] == ev.RunStarted.class_version
    assert "AgentSnapshot" in running.events  # snapshots are read through the same codec
    assert SampleV1Moved.__name__ in EVENT_TYPES  # a test's sample class is no part of it
    assert SampleV1Moved.__name__ not in running.events


@given(catalogs, st.integers(1, 3))
def test_a_format_can_read_itself_and_is_not_newer_than_itself(
    events: dict[str, int], n: int
) -> None:
    written = LedgerFormat(format=n, events=events)
    assert unreadable(written, written) == []
    assert not is_newer(written, written)


@given(catalogs, st.integers(1, 3), st.data())
def test_a_reader_with_fewer_types_or_older_versions_cannot_read_the_format(
    events: dict[str, int], n: int, data: st.DataObject
) -> None:
    recorded = LedgerFormat(format=n, events=events)
    name = data.draw(st.sampled_from(sorted(events)))
    older = LedgerFormat(format=n, events={**events, name: events[name] - 1})
    without = LedgerFormat(format=n, events={k: v for k, v in events.items() if k != name})
    behind = LedgerFormat(format=n - 1, events=events)
    for reader in (without, behind) + ((older,) if events[name] > 1 else ()):
        assert unreadable(recorded, reader) != []
        assert unreadable(reader, recorded) == []  # the newer one reads the older one
        assert is_newer(recorded, reader)


def test_the_refusal_names_both_releases_both_formats_and_what_cannot_be_read() -> None:
    running = LedgerFormat(format=1, events={"RunStarted": 1}, owlclaw="0.1.0")
    recorded = LedgerFormat(format=2, events={"RunStarted": 2, "ArchiveSealed": 1}, owlclaw="0.3.0")
    assert str(LedgerTooNew(recorded, running)) == (
        "this ledger was written by OwlClaw 0.3.0 (ledger format 2), newer than this OwlClaw"
        " 0.1.0 (ledger format 1), which cannot read ledger format 2 (this OwlClaw reads up to"
        " 1); event type ArchiveSealed (unknown to this OwlClaw); RunStarted version 2 (this"
        " OwlClaw reads up to 1): upgrade OwlClaw to 0.3.0 or later to open it"
    )
