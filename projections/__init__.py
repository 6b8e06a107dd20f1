"""Read models built from the ledger: audit and runs views (memory, schedules to come),
the projection runner, and subscriptions for analytics jobs."""

from typing import Any

from events.ledger import Ledger
from owlclaw.config import OwlClawConfig
from projections.audit import AuditView
from projections.embedders import embedder_for
from projections.memory import MemoryStore, MemoryView
from projections.runner import ProjectionFailed, ProjectionRunner, ProjectionStatus, rebuild
from projections.runs import RunsView
from projections.schedules import SchedulesView
from projections.view import View

VIEWS: dict[str, type[View]] = {
    view.name: view for view in (AuditView, RunsView, MemoryView, SchedulesView)
}


def view_options(name: str, config: OwlClawConfig) -> dict[str, Any]:
    """Constructor options of a view from the configuration."""
    if name != MemoryView.name:
        return {}
    memory = config.memory
    return {
        "embedder": embedder_for(memory.embedding_model, memory.embedding_dimensions),
        "size_limit": memory.memory_md_limit_bytes,
    }


def open_memory(ledger: Ledger, config: OwlClawConfig) -> MemoryStore:
    """Recall over the memory view (its tables created); the projection runner fills it."""
    view = MemoryView(ledger.datastore, **view_options(MemoryView.name, config))
    view.create_table()
    return MemoryStore(view, half_life_days=config.memory.half_life_days)


def open_views(ledger: Ledger, config: OwlClawConfig | None = None) -> list[View]:
    """Every view, with its tables created (idempotent), on the ledger's database."""
    config = config or OwlClawConfig()
    views = [cls(ledger.datastore, **view_options(name, config)) for name, cls in VIEWS.items()]
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
    "SchedulesView",
    "View",
    "open_memory",
    "open_views",
    "rebuild",
    "view_options",
]
