"""The composition root of the read side: views and recall built from the configuration.

``projections`` knows nothing of OwlClaw's configuration; this is where the two meet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from events import Ledger
from owlclaw.config import OwlClawConfig
from projections import VIEWS, ApprovalNotifications, MemoryStore, MemoryView, View
from projections.embedders import Embedder, embedder_for


def view_options(
    name: str, config: OwlClawConfig, embedder: Embedder | None = None
) -> dict[str, Any]:
    """Constructor options of a view from the configuration; ``embedder`` replaces the memory
    view's in-process model (a Ray process's: the node's shared embedder of that model)."""
    if name == ApprovalNotifications.name:
        approvals = config.approvals
        return {
            "url": approvals.notify_url,
            "timeout_s": approvals.notify_timeout_s,
            "attempts": approvals.notify_attempts,
        }
    if name != MemoryView.name:
        return {}
    memory = config.memory
    if embedder is None:
        embedder = embedder_for(memory.embedding_model, memory.embedding_dimensions)
    return {
        "embedder": embedder,
        "size_limit": memory.memory_md_limit_bytes,
        "memory_dir": memory_dir(config),
    }


def memory_dir(config: OwlClawConfig) -> Path:
    """Where the agents' MEMORY.md files are: ``<data_dir>/memory/<agent>/``."""
    return config.data_path / "memory"


def open_memory_view(
    ledger: Ledger, config: OwlClawConfig, embedder: Embedder | None = None
) -> MemoryView:
    """The memory view as configured, its tables created (``embedder``: see ``view_options``)."""
    view = MemoryView(ledger, **view_options(MemoryView.name, config, embedder))
    view.create_table()
    return view


def open_memory(
    ledger: Ledger, config: OwlClawConfig, embedder: Embedder | None = None
) -> MemoryStore:
    """Recall over the memory view (its tables created); the projection runner fills it."""
    return MemoryStore(
        open_memory_view(ledger, config, embedder), half_life_days=config.memory.half_life_days
    )


def open_views(
    ledger: Ledger, config: OwlClawConfig | None = None, embedder: Embedder | None = None
) -> list[View]:
    """Every view, with its tables created (idempotent), on the ledger's database
    (``embedder``: see ``view_options``)."""
    config = config or OwlClawConfig()
    views = [cls(ledger, **view_options(name, config, embedder)) for name, cls in VIEWS.items()]
    for view in views:
        view.create_table()
    return views
