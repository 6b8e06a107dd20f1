"""Agents view: one row per registered agent, to list them a page at a time however many there
are (the console's agents page, ``owlclaw status``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import msgspec
from psycopg import Cursor

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger_log import LoggedEvent
from projections.sqlvalues import text
from projections.view import View

PAGE_SIZE = 50
MAX_PAGE = 500


class AgentRow(msgspec.Struct, frozen=True):
    agent_id: str
    parent_agent_id: str
    """The agent that spawned this one ("" for a top-level agent)."""
    registered_at: datetime


class AgentsView(View):
    name: ClassVar[str] = "agents"
    tables: ClassVar[tuple[str, ...]] = ("agents",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (ev.AgentRegistered,)
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {agents} ("
        " agent_id text PRIMARY KEY, parent_agent_id text NOT NULL,"
        " registered_at timestamptz NOT NULL, position bigint NOT NULL)",
    )

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e = logged.event
        assert isinstance(e, ev.AgentRegistered)
        curs.execute(
            self.sql(
                "INSERT INTO {agents} (agent_id, parent_agent_id, registered_at, position)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id) DO NOTHING"
            ),
            (text(e.agent_id), text(e.parent_agent_id), e.timestamp, logged.position),
        )

    def page(self, after: str | None = None, limit: int = PAGE_SIZE) -> list[AgentRow]:
        """Up to ``limit`` (at most MAX_PAGE) agents by id, those after ``after`` (the last id
        of the previous page; None: from the first)."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"a page holds 1 to {MAX_PAGE} agents, not {limit}")
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, parent_agent_id, registered_at FROM {agents}"
                    " WHERE agent_id > %s ORDER BY agent_id LIMIT %s"
                ),
                (after or "", limit),
            ).fetchall()
        return [msgspec.convert(row, AgentRow) for row in rows]

    def count(self) -> int:
        """How many agents are registered (as far as the view has read the ledger)."""
        with self.transaction(commit=False) as curs:
            row = curs.execute(self.sql("SELECT count(*) AS n FROM {agents}")).fetchone()
        return int(row["n"]) if row else 0
