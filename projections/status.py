"""How far a view is behind the ledger, whether its runner runs, what it parked, which version
of its code built its tables and how far a rebuild of it has come.

Its own module because it only reads (the tracked positions, the head, the parked events, the
recorded version, the rebuild's lock): ``owlclaw inspect``, ``owlclaw agents`` and /metrics ask
for it without running a view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from events.ledger import Ledger
from projections import parked as parking
from projections import versions
from projections.locks import REBUILD_LOCK_CLASS, REBUILD_RUNNING
from projections.parked import ParkedEvent
from projections.view import REBUILD_SUFFIX, View


@dataclass(frozen=True)
class RebuildProgress:
    """A rebuild running now (in any process): the log position its new tables reached."""

    position: int
    head: int


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    position: int
    head: int
    lag_events: int
    lag_seconds: float
    running: bool
    error: str | None
    parked_count: int
    parked: tuple[ParkedEvent, ...]
    version: int | None = None
    """The version of the view's code that built its serving tables (None: not built yet)."""
    code_version: int = 1
    """The version of the view's code running here: higher than ``version`` until a rebuild
    switches over; lower when a newer OwlClaw built the tables."""
    rebuilding: RebuildProgress | None = None


def projection_status(
    ledger: Ledger, view: View, running: bool = False, error: BaseException | None = None
) -> ProjectionStatus:
    position = view.max_tracking_id(view.tracking_name) or 0
    head = ledger.log.head()
    with view.transaction() as curs:
        errors = parking.parked(curs, view.tracking_name)
        version = versions.recorded(curs, [view.name]).get(view.name)
        row = curs.execute(REBUILD_RUNNING, (REBUILD_LOCK_CLASS, view.name)).fetchone()
    rebuilding = None
    if row and row["running"]:
        reached = view.max_tracking_id(view.name + REBUILD_SUFFIX) or 0
        rebuilding = RebuildProgress(position=reached, head=head)
    lag_seconds = 0.0
    if head > position:
        oldest = ledger.log.read(after=position, limit=1)
        if oldest:
            age = datetime.now(UTC) - oldest[0].event.timestamp
            lag_seconds = max(0.0, age.total_seconds())
    return ProjectionStatus(
        name=view.name,
        position=position,
        head=head,
        lag_events=max(0, head - position),
        lag_seconds=round(lag_seconds, 3),
        running=running,
        error=str(error) if error else None,
        parked_count=len(errors),
        parked=tuple(errors),
        version=version,
        code_version=view.version,
        rebuilding=rebuilding,
    )
