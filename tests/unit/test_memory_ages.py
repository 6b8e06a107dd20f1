"""The memory age policy's decision (projections.memory_ages.due) and its configuration: for any
history of remember / recall / time passing, a memory is archived exactly when it went unused
for the archive age, and deleted exactly when it stayed archived for the delete age."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from owlclaw.cli import app
from owlclaw.config import ConfigError, load_config
from projections.memory import MemoryAge
from projections.memory_ages import AgePolicy, Due, due

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Kept:
    """One memory of the simulated agent, as the view would hold it."""

    memory_id: UUID
    last_used: datetime
    archived_at: datetime | None = None
    deleted: bool = False
    uses: list[datetime] = field(default_factory=list)


Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.just(0)),
        st.tuples(st.just("recall"), st.integers(0, 20)),
        st.tuples(st.just("advance"), st.integers(1, 400)),
    ),
    max_size=40,
)
policies = st.builds(AgePolicy, st.integers(0, 120), st.integers(0, 400))


def simulate(history: list[Step], policy: AgePolicy) -> tuple[list[Kept], list[datetime]]:
    """Play ``history`` (time advancing in days), a policy pass after each advance; recall
    finds only active memories (index into them)."""
    now, memories, passes = START, list[Kept](), []
    for action, n in history:
        if action == "remember":
            memories.append(Kept(uuid4(), now, uses=[now]))
        elif action == "recall":
            active = [m for m in memories if m.archived_at is None and not m.deleted]
            if active:
                m = active[n % len(active)]
                m.last_used = now
                m.uses.append(now)
        else:
            now += timedelta(days=n)
            passes.append(now)
            rows = [
                MemoryAge("a", m.memory_id, m.last_used, m.archived_at)
                for m in memories
                if not m.deleted
            ]
            d = due(rows, now, policy)
            for m in memories:
                if m.memory_id in d.archive:
                    m.archived_at = now
                if m.memory_id in d.delete:
                    m.deleted = True
    return memories, passes


def _archived_at(m: Kept, passes: list[datetime], days: int) -> datetime | None:
    """The first pass at which ``m`` had gone unused for ``days`` (its uses before then)."""
    if not days:
        return None
    for at in passes:
        used = max(u for u in m.uses if u <= at) if any(u <= at for u in m.uses) else None
        if used is not None and at - used >= timedelta(days=days):
            return at
    return None


@given(steps, policies)
def test_archived_iff_unused_for_the_archive_age_deleted_iff_archived_for_the_delete_age(
    history: list[Step], policy: AgePolicy
) -> None:
    memories, passes = simulate(history, policy)
    for m in memories:
        expected = _archived_at(m, passes, policy.archive_after_days)
        assert m.archived_at == expected
        if m.archived_at is None:
            assert not m.deleted
            continue
        assert all(u <= m.archived_at for u in m.uses)  # nothing revived it
        expires = [
            at
            for at in passes
            if policy.delete_after_days
            and at - m.archived_at >= timedelta(days=policy.delete_after_days)
        ]
        assert m.deleted == bool(expires)


@given(policies, st.integers(0, 1000))
def test_the_pass_is_idempotent(policy: AgePolicy, days: int) -> None:
    """Applying what is due changes what is due: a second pass at the same moment finds
    nothing more to do."""
    now = START + timedelta(days=days)
    rows = [
        MemoryAge("a", uuid4(), START, None),
        MemoryAge("a", uuid4(), START, START),
    ]
    first = due(rows, now, policy)
    after = [
        MemoryAge(r.agent_id, r.memory_id, r.last_used, now) if r.memory_id in first.archive else r
        for r in rows
        if r.memory_id not in first.delete
    ]
    assert due(after, now, policy) == Due([], [])


def test_off_turns_each_step_off() -> None:
    old = [MemoryAge("a", uuid4(), START, None), MemoryAge("a", uuid4(), START, START)]
    later = START + timedelta(days=10_000)
    assert due(old, later, AgePolicy(0, 365)).archive == []
    assert due(old, later, AgePolicy(90, 0)).delete == []
    assert AgePolicy(0, 0).off and not AgePolicy(0, 1).off


def test_a_negative_age_is_refused() -> None:
    with pytest.raises(ValueError, match="archive_after_days"):
        AgePolicy(-1, 365)


def test_the_configuration_defaults_to_90_and_365_days(tmp_path: Path) -> None:
    memory = load_config(tmp_path / "none.toml", environ={}).memory
    assert (memory.archive_after_days, memory.delete_after_days) == (90, 365)
    toml = tmp_path / "owlclaw.toml"
    toml.write_text("[memory]\narchive_after_days = 0\n")
    environ = {"OWLCLAW_MEMORY_DELETE_AFTER_DAYS": "30"}
    memory = load_config(toml, environ=environ).memory
    assert (memory.archive_after_days, memory.delete_after_days) == (0, 30)


@pytest.mark.parametrize("value", ["-1", "soon", "1.5"])
def test_invalid_ages_are_refused_naming_the_setting(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="archive_after_days"):
        load_config(tmp_path / "none.toml", environ={"OWLCLAW_MEMORY_ARCHIVE_AFTER_DAYS": value})


@pytest.mark.parametrize("other", [["--recall", "x"], ["--as-of", "@1"]])
def test_owlclaw_memory_archived_refuses_recall_and_as_of(other: list[str]) -> None:
    result = CliRunner().invoke(
        app, ["memory", "trader", "--archived", *other], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2
    assert "it takes no --as-of or --recall" in " ".join(result.output.split())
