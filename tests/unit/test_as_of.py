"""Moments of the log and what changed between two identity versions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from events import catalog as ev
from events.ledger_log import LoggedEvent
from owlclaw.audit.as_of import Moment, UnknownMoment, changed_files, parse_moment

T = datetime(2026, 11, 3, 14, 2, tzinfo=UTC)


def identity(**fields: object) -> ev.IdentityLoaded:
    base: dict[str, object] = {
        "soul_sha256": "s1",
        "identity_sha256": "i1",
        "skills": {"entry": "e1", "exit": "x1"},
        "config_sha256": "c1",
    }
    return ev.IdentityLoaded(
        originator_id=uuid.uuid4(),
        originator_version=1,
        timestamp=T,
        **(base | fields),  # type: ignore[arg-type]
    )


def test_a_moment_is_a_log_position_or_an_iso_time_utc_unless_it_names_an_offset() -> None:
    assert parse_moment("@1234") == Moment(position=1234)
    assert parse_moment("2026-11-03T14:02:00Z") == Moment(at=T)
    assert parse_moment("2026-11-03T14:02:00") == Moment(at=T)
    plus_one = parse_moment("2026-11-03T15:02:00+01:00")
    assert plus_one.at == T and plus_one.at.tzinfo == timezone(timedelta(hours=1))


@pytest.mark.parametrize("text", ["@", "@-1", "@12a", "yesterday", "2026-13-01", ""])
def test_anything_else_is_refused_naming_both_forms(text: str) -> None:
    with pytest.raises(UnknownMoment, match="@1234"):
        parse_moment(text)


def test_a_moment_includes_events_up_to_its_position_or_time_inclusive() -> None:
    def logged(position: int, at: datetime) -> LoggedEvent:
        event = ev.AgentWarning(
            originator_id=uuid.uuid4(), originator_version=1, timestamp=at, source="x", message=""
        )
        return LoggedEvent(position, event)

    early, late = logged(5, T), logged(6, T + timedelta(microseconds=1))
    assert [Moment(position=5).includes(e) for e in (early, late)] == [True, False]
    assert [Moment(at=T).includes(e) for e in (early, late)] == [True, False]
    assert [Moment().includes(e) for e in (early, late)] == [True, True]


def test_changed_files_names_each_file_that_differs_and_each_skill_added_or_removed() -> None:
    before = identity()
    assert changed_files(before, identity()) == []
    assert changed_files(before, identity(soul_sha256="s2")) == ["SOUL.md"]
    after = identity(
        identity_sha256="i2", config_sha256="c2", skills={"entry": "e2", "scalp": "p1"}
    )
    assert changed_files(before, after) == [
        "IDENTITY.md",
        "owlclaw.toml",
        "SKILL.md of skill entry",
        "SKILL.md of skill exit (removed)",
        "SKILL.md of skill scalp (added)",
    ]
    assert changed_files(None, before) == [
        "SOUL.md",
        "IDENTITY.md",
        "owlclaw.toml",
        "SKILL.md of skill entry (added)",
        "SKILL.md of skill exit (added)",
    ]
