"""`owlclaw projections status`'s version and rebuild columns."""

from __future__ import annotations

from owlclaw.cli.projections import rebuild_cell, version_cell
from projections.status import ProjectionStatus, RebuildProgress


def status(
    version: int | None, code_version: int, rebuilding: RebuildProgress | None = None
) -> ProjectionStatus:
    return ProjectionStatus(
        "memory", 10, 14, 4, 0.0, True, None, 0, (), version, code_version, rebuilding
    )


def test_the_version_column_shows_a_pending_upgrade_and_a_newer_build() -> None:
    assert version_cell(status(2, 2)) == "2"
    assert version_cell(status(1, 2)) == "1 → 2"
    assert version_cell(status(3, 2)) == "[red]3 (newer than 2)[/]"
    assert version_cell(status(None, 1)) == "-"


def test_the_rebuild_column_shows_the_position_reached_of_the_head() -> None:
    assert rebuild_cell(status(1, 2, RebuildProgress(position=7, head=14))) == "7 / 14"
    assert rebuild_cell(status(2, 2)) == "-"
