"""What a reading command shows, as the server sends it to the CLI and the CLI computes it
without one: plain structs of light modules, so that a CLI asking a server decodes its answer
without importing the ledger, the views or the database driver."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from projections.run_row import RunRow


class Runs(msgspec.Struct, frozen=True):
    rows: list[RunRow]
    """The agent's latest runs, newest first."""
    behind: str | None
    """The warning when the view could not be brought up to date."""


class Schedules(msgspec.Struct, frozen=True):
    rows: list[dict[str, Any]]
    """schedule_id, agent_id, kind, focus, cron, on_missed, status, next_fire_at, last_fire_at,
    last_outcome, fires, misses (missed fires), backend; soonest first."""
    behind: str | None
    """The warning when the view could not be brought up to date."""


class SpawnNode(msgspec.Struct):
    """One sub-agent run in an agent's tree, with the sub-agents it spawned."""

    agent_id: str
    run_id: str
    task: str
    status: str
    children: list[SpawnNode] = []


class LoggedRow(msgspec.Struct, frozen=True):
    """One event of a page of an agent's ledger (``owlclaw ledger``)."""

    position: int
    stream: UUID
    version: int
    type: str
    timestamp: datetime
    data: dict[str, Any]
    run: int | None
    """The run number of its run stream; None: the agent's own stream."""


class LedgerPage(msgspec.Struct, frozen=True):
    """A page of an agent's events (its stream and its runs' streams) in log order."""

    agent_id: str
    events: list[LoggedRow]
    next_after: int | None
    """Where the next page starts (``--after``); None: this is the last."""
    sub_agents: list[SpawnNode]
