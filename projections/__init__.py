"""Read models built from the ledger: the audit, runs, memory and schedules views, the
outbound views (approval notices, the outbox of sent messages), the projection runner, and
subscriptions for analytics jobs. Depends only on ``events``; the configuration is applied in
``owlclaw.compose``."""

from projections.agents import AgentsView
from projections.failures import ProjectionFailed
from projections.memory import MemoryView
from projections.notifications import ApprovalNotifications
from projections.outbox import Outbox
from projections.rebuild import rebuild
from projections.recall import MemoryStore
from projections.runner import ProjectionRunner
from projections.runs import RunsView
from projections.schedules import SchedulesView
from projections.status import ProjectionStatus
from projections.tool_calls import AuditView
from projections.view import View

VIEWS: dict[str, type[View]] = {
    view.name: view
    for view in (
        AuditView,
        RunsView,
        MemoryView,
        SchedulesView,
        ApprovalNotifications,
        Outbox,
        AgentsView,
    )
}


__all__ = [
    "VIEWS",
    "AgentsView",
    "ApprovalNotifications",
    "AuditView",
    "MemoryStore",
    "MemoryView",
    "Outbox",
    "ProjectionFailed",
    "ProjectionRunner",
    "ProjectionStatus",
    "RunsView",
    "SchedulesView",
    "View",
    "rebuild",
]
