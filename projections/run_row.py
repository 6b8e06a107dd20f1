"""A row of the runs view, apart from the view: who reads rows (the CLI decoding a server's
answer) needs neither the database driver nor the ledger."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec


class RunRow(msgspec.Struct, frozen=True):
    run_id: UUID
    run_no: int
    trigger: str
    focus: str | None
    status: str
    started_at: datetime
    duration_ms: float | None
    iterations: int
    tool_calls: int
    tokens: int
    cost_usd: float
    error: str | None
    ended_at: datetime | None = None
    plan_done: int | None = None
    """Items of the run's current plan that are done (None: no plan, or erased)."""
    plan_items: int | None = None
