"""Read models built from the ledger: the audit, runs, memory and schedules views, the
outbound views (approval notices, the outbox of sent messages), the projection runner, and
subscriptions for analytics jobs. Depends only on ``events``; the configuration is applied in
``owlclaw.compose``."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections.agents import AgentsView
    from projections.failures import ProjectionFailed
    from projections.memory import MemoryView
    from projections.notifications import ApprovalNotifications
    from projections.outbox import Outbox
    from projections.recall import MemoryStore
    from projections.runner import ProjectionRunner
    from projections.runs import RunsView
    from projections.schedules import SchedulesView
    from projections.status import ProjectionStatus
    from projections.tool_calls import AuditView
    from projections.view import View

    VIEWS: dict[str, type[View]]

_LAZY = {
    "AgentsView": "projections.agents",
    "ProjectionFailed": "projections.failures",
    "MemoryView": "projections.memory",
    "ApprovalNotifications": "projections.notifications",
    "Outbox": "projections.outbox",
    "MemoryStore": "projections.recall",
    "ProjectionRunner": "projections.runner",
    "RunsView": "projections.runs",
    "SchedulesView": "projections.schedules",
    "ProjectionStatus": "projections.status",
    "AuditView": "projections.tool_calls",
    "View": "projections.view",
}


def __getattr__(name: str) -> Any:
    """Each name imported when first named: a command reading one view imports that view, not
    every view with its drivers (the notices' HTTP client, pgvector)."""
    import importlib

    if name == "VIEWS":
        value: Any = {
            view.name: view
            for view in (
                __getattr__(view_name)
                for view_name in (
                    "AuditView",
                    "RunsView",
                    "MemoryView",
                    "SchedulesView",
                    "ApprovalNotifications",
                    "Outbox",
                    "AgentsView",
                )
            )
        }
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'projections' has no attribute {name!r}")
    globals()[name] = value
    return value


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
]
