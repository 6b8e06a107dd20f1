"""What the CLI prints for a person: times at a glance, approval ids short enough for 80
columns yet unique."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from owlclaw.reports.approvals import unique_prefixes
from owlclaw.reports.relative_time import relative

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_times_read_at_a_glance() -> None:
    assert relative(NOW + timedelta(hours=23, minutes=59), NOW) == "in 23 h"
    assert relative(NOW + timedelta(days=2, hours=3), NOW) == "in 2 d"
    assert relative((NOW - timedelta(minutes=5, seconds=3)).isoformat(), NOW) == "5 min ago"
    assert relative(NOW + timedelta(seconds=9), NOW) == "in 9 s"
    assert relative(NOW - timedelta(milliseconds=300), NOW) == "0 s ago"


@given(st.lists(st.uuids().map(str), min_size=1, max_size=30, unique=True), st.data())
def test_each_prefix_is_at_least_8_long_and_names_one_id(
    ids: list[str], data: st.DataObject
) -> None:
    shown = data.draw(st.lists(st.sampled_from(ids), unique=True, min_size=1))
    prefixes = unique_prefixes(shown, ids)
    for approval_id, prefix in prefixes.items():
        assert len(prefix) >= 8 and approval_id.startswith(prefix)
        assert [i for i in ids if i.startswith(prefix)] == [approval_id]


def test_a_prefix_grows_until_it_is_unique() -> None:
    ids = ["abcdefgh-1", "abcdefgh-2", "zzzzzzzz-3"]
    assert unique_prefixes(ids, ids) == {
        "abcdefgh-1": "abcdefgh-1",
        "abcdefgh-2": "abcdefgh-2",
        "zzzzzzzz-3": "zzzzzzzz",
    }
