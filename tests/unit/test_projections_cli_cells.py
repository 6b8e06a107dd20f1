"""`owlclaw projections status`: the version column and the notes under the table (a pending
upgrade, a newer build, a rebuild's progress), in 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from owlclaw.cli.projections import projections_table, version_cell, version_notes
from projections.status import ProjectionStatus, RebuildProgress


def status(
    version: int | None,
    code_version: int,
    rebuilding: RebuildProgress | None = None,
    name: str = "approval_notifications",
) -> ProjectionStatus:
    return ProjectionStatus(
        name,
        123456,
        1234567,
        1111111,
        12345.5,
        True,
        None,
        0,
        (),
        version,
        code_version,
        rebuilding,
    )


def test_the_version_column_shows_a_pending_upgrade_and_a_newer_build() -> None:
    assert version_cell(status(2, 2)) == "2"
    assert version_cell(status(1, 2)) == "1 → 2"
    assert version_cell(status(3, 2)) == "[red]3[/]"
    assert version_cell(status(None, 1)) == "-"


def test_the_notes_say_what_waits_what_runs_and_what_is_refused() -> None:
    assert version_notes(status(2, 2)) == []
    assert version_notes(status(1, 2, name="memory")) == [
        "memory: version 1 built its tables, this code is version 2: `owlclaw run` rebuilds it"
    ]
    running = status(1, 2, RebuildProgress(position=7, head=14), name="memory")
    assert version_notes(running) == ["memory: rebuilding, log position 7 of 14 reached"]
    [newer] = version_notes(status(3, 2, name="memory"))
    assert "built by a newer OwlClaw" in newer and "(version 3; this one knows 2)" in newer


def test_the_table_fits_80_columns_with_the_longest_name_and_a_pending_upgrade() -> None:
    shown = Console(file=io.StringIO(), width=80, record=True)
    shown.print(projections_table([status(1, 2), status(12, 12, name="memory")]))
    lines = shown.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    row = next(line for line in lines if "approval_notifications" in line)
    assert "1 → 2" in row and "123456" in row and "1234567" in row
