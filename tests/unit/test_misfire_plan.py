"""The misfire policy: every fire that came due while no timer worker ran is either fired or
recorded as missed, as its schedule's policy says; nothing is dropped or invented."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.timers.fires import GRACE, plan


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=30, unique=True),
    policy=st.sampled_from(["catch_up", "coalesce", "skip"]),
    window=st.integers(0, 10_000),
)
def test_misfire_plan_accounts_for_every_due_fire(
    offsets: list[int], policy: str, window: int
) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    due = sorted(now - timedelta(seconds=s) for s in offsets)
    decided = plan(due, now, policy, timedelta(seconds=window))
    assert sorted(t for t, _ in decided) == due  # nothing dropped, nothing invented
    for t, missed in decided:
        late, inside = now - t > GRACE, now - t <= timedelta(seconds=window)
        if not late:
            assert missed is None
        elif policy == "skip" or not inside:
            assert missed is not None
    fired_late = [t for t, missed in decided if missed is None and now - t > GRACE]
    if policy == "coalesce":
        assert len(fired_late) <= 1
