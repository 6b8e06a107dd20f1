"""Which timers Hatchet holds: its ticker sees a one-off only 5 s ahead, so sooner ones stay on
the built-in fast path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from owlclaw.timers.hatchet_backend import LEAD, HatchetBackend
from owlclaw.timers.registrations import BuiltinBackend

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(kind: str, in_s: float) -> dict[str, Any]:
    return {"kind": kind, "next_fire_at": NOW + timedelta(seconds=in_s)}


@pytest.mark.parametrize(
    ("kind", "in_s", "held"),
    [
        ("once", LEAD.total_seconds(), True),
        ("once", 3600, True),
        ("once", LEAD.total_seconds() - 0.001, False),
        ("once", 0.5, False),
        ("once", -5, False),
        ("cron", 0.5, True),
    ],
)
def test_hatchet_holds_one_offs_due_at_least_the_lead_ahead_and_every_cron(
    kind: str, in_s: float, held: bool
) -> None:
    backend = HatchetBackend(hatchet=None)  # type: ignore[arg-type]  # never called by holds
    assert backend.holds(row(kind, in_s), NOW) is held


def test_the_builtin_backend_holds_everything() -> None:
    assert BuiltinBackend().holds(row("once", 0), NOW)
