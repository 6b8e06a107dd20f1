"""An agent's streams and whether their hash chains hold (``owlclaw verify``, the console's
ledger page)."""

from __future__ import annotations

from uuid import UUID

from events import Ledger
from events.hashchain import VerifyReport


def agent_streams(ledger: Ledger, agent_id: str) -> list[UUID]:
    """The agent's own stream, then its runs' streams in run order (UnknownAgent if none)."""
    agent = ledger.load_agent(agent_id)
    return [agent.id, *agent.run_ids()]


def verify_agent(ledger: Ledger, agent_id: str | None = None) -> VerifyReport:
    """Recompute the hash chains of the agent's streams (of every stream without one)."""
    return ledger.verify(None if agent_id is None else agent_streams(ledger, agent_id))
