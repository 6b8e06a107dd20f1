"""Read models built from the ledger: audit and runs views (memory, schedules to come),
the projection runner, and subscriptions for analytics jobs."""

from events.ledger import Ledger
from projections.audit import AuditView
from projections.memory import MemoryStore, MemoryView
from projections.runner import ProjectionFailed, ProjectionRunner, ProjectionStatus, rebuild
from projections.runs import RunsView
from projections.view import View

VIEWS: dict[str, type[View]] = {view.name: view for view in (AuditView, RunsView, MemoryView)}


def open_views(ledger: Ledger) -> list[View]:
    """Every view, with its tables created (idempotent), on the ledger's database."""
    views = [cls(ledger.recorder.datastore) for cls in VIEWS.values()]
    for view in views:
        view.create_table()
    return views


__all__ = [
    "VIEWS",
    "AuditView",
    "MemoryStore",
    "MemoryView",
    "ProjectionFailed",
    "ProjectionRunner",
    "ProjectionStatus",
    "RunsView",
    "View",
    "open_views",
    "rebuild",
]
