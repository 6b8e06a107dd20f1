"""How far a view is behind the ledger, whether its runner runs, what it parked.

Its own module because it only reads (the tracked position, the head, the parked events):
``owlclaw inspect``, ``owlclaw agents`` and /metrics ask for it without running a view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from events.ledger import Ledger
from projections import parked as parking
from projections.parked import ParkedEvent
from projections.view import View


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


def projection_status(
    ledger: Ledger, view: View, running: bool = False, error: BaseException | None = None
) -> ProjectionStatus:
    position = view.max_tracking_id(view.tracking_name) or 0
    head = ledger.log.head()
    with view.transaction() as curs:
        errors = parking.parked(curs, view.tracking_name)
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
    )
