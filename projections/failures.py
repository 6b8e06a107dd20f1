"""What a projection does with an error: an outage is raised (never parked), a runner that
stopped names the log position.

Their own module because the runner and ``retry_parked`` tell an outage from a bad event the
same way.
"""

from __future__ import annotations

import psycopg
from eventsourcing import persistence

from events.errors import LedgerUnavailable
from projections.embedders import EmbeddingUnavailable

INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    persistence.OperationalError,
    persistence.InterfaceError,
    persistence.ConnectionPoolClosedError,
    LedgerUnavailable,
    EmbeddingUnavailable,
)
"""Errors of a service the views depend on (the database, the embedding model), not of an
event: raised, never parked, so that an outage delays a view instead of parking every event it
meets; the view resumes once its runner is restarted and the service is back."""


def is_infrastructure(error: BaseException) -> bool:
    return isinstance(error, INFRASTRUCTURE_ERRORS)


class ProjectionFailed(RuntimeError):
    """The projection's runner stopped on an error it does not park (an outage, an unreadable
    event); names the log position."""

    def __init__(self, name: str, position: int | None, cause: BaseException):
        where = f" at log position {position}" if position is not None else ""
        super().__init__(f"projection {name!r} stopped{where}: {cause}")
        self.position = position
        self.cause = cause
