"""The read side from the configuration: every view (the outbox and the approval notices
among them), one place that says which options each takes, and the timer registrations.

Light on purpose: the CLI's read-only commands import this, never Ray or the agents' runtime.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from events import Ledger
from events.tracking import create_tables
from owlclaw.compose.memory import memory_options
from owlclaw.config import OwlClawConfig
from projections import (
    AgentsView,
    ApprovalNotifications,
    AuditView,
    MemoryView,
    Outbox,
    RunsView,
    SchedulesView,
    View,
)
from projections.embedders import Embedder
from projections.rebuild import older, refuse_newer

if TYPE_CHECKING:
    from owlclaw.timers.registrations import TimerBackend, TimerRegistrations

V = TypeVar("V", bound=View)


@dataclass(frozen=True)
class ConfiguredView:
    """A view's class and its constructor options from the configuration (``rebuild`` makes
    its fresh tables from both)."""

    view: type[View]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.view.name

    def open(self, ledger: Ledger) -> View:
        """The view, its tables created (idempotent)."""
        view = self.view(ledger, **self.options)
        view.create_table()
        return view


def configured_views(
    config: OwlClawConfig, embedder: Embedder | None = None, *, memory_files: bool = True
) -> list[ConfiguredView]:
    """Every view the projection runners keep current, in the order they start (``embedder``,
    ``memory_files``: see ``memory_options``)."""
    approvals = config.approvals
    notify = {
        "url": approvals.notify_url,
        "timeout_s": approvals.notify_timeout_s,
        "attempts": approvals.notify_attempts,
    }
    return [
        ConfiguredView(AuditView),
        ConfiguredView(RunsView),
        ConfiguredView(MemoryView, memory_options(config, embedder, files=memory_files)),
        ConfiguredView(SchedulesView),
        ConfiguredView(ApprovalNotifications, notify),
        ConfiguredView(Outbox),
        ConfiguredView(AgentsView),
    ]


def open_views(
    ledger: Ledger, config: OwlClawConfig | None = None, embedder: Embedder | None = None
) -> list[View]:
    """Every view, with its tables created (idempotent), on the ledger's database."""
    configured = configured_views(config or OwlClawConfig(), embedder)
    views = [c.view(ledger, **c.options) for c in configured]
    create_tables(views)
    return views


def open_served_views(
    ledger: Ledger, config: OwlClawConfig, embedder: Embedder | None = None
) -> tuple[list[View], list[ConfiguredView]]:
    """Every view for a service that keeps them current, with their tables created; and the
    ones an older version of their code built, which the service rebuilds in the background.

    Refused (``ViewTooNew``) before any table is created or changed when a newer OwlClaw built
    one of them.
    """
    configured = configured_views(config, embedder)
    views = [c.view(ledger, **c.options) for c in configured]
    refuse_newer(views)
    create_tables(views)
    behind = {v.name for v in older(views)}
    return views, [c for c in configured if c.name in behind]


def open_view(ledger: Ledger, config: OwlClawConfig, kind: type[V]) -> V:
    """The configured view of class ``kind``, its tables created."""
    view = next(v for v in configured_views(config) if v.view is kind).open(ledger)
    assert isinstance(view, kind)
    return view


def open_timer_registrations(
    ledger: Ledger,
    backend: TimerBackend,
    served: Collection[str] | None = None,
    *,
    adopt: bool = True,
) -> TimerRegistrations:
    """The timer registrations with ``backend``, their table created and (``adopt``) the timers
    other backends hold moved to it; ``served``: the agents whose timers this process fires."""
    from owlclaw.timers.registrations import TimerRegistrations

    registrations = TimerRegistrations(ledger, backend=backend, served=served)
    registrations.create_table()
    if adopt:
        registrations.adopt()
    return registrations
