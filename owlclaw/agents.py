"""Where agents live: one interface, two implementations.

Everything that reaches an agent is a message (``owlclaw.messages``) to its one writer through
``Agents.ask``: in this process (``actors.host.AgentHost``: a FIFO mailbox per agent) or on a
Ray cluster (``actors.directory.AgentDirectory``: named actors hosting those mailboxes). Both
accept a run once its RunQueued is committed and return the same typed replies;
``tests/integration/test_agents_conformance.py`` holds them to the same contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, TypeVar

import msgspec

from events import catalog as ev
from owlclaw.messages import Message

R = TypeVar("R")


class AgentActivity(msgspec.Struct, frozen=True):
    """One hosted agent as its host sees it now."""

    queued: int
    running: str | None
    completed: int
    idle_s: float


class HostStatus(msgspec.Struct, frozen=True):
    agents: dict[str, AgentActivity]
    """Active (not passivated) agents."""
    activations: int
    passivations: int
    mcp_servers: dict[str, str] = msgspec.field(default_factory=dict)
    """The host's MCP connections, by server name: ready with its tools, or why not."""

    @classmethod
    def merged(cls, statuses: Sequence[HostStatus]) -> HostStatus:
        """Several hosts as one; an MCP server one of them cannot reach shows unavailable."""
        servers: dict[str, str] = {}
        for status in statuses:
            for name, state in status.mcp_servers.items():
                if not servers.get(name, "").startswith("unavailable"):
                    servers[name] = state
        return cls(
            agents={a: s for status in statuses for a, s in status.agents.items()},
            activations=sum(s.activations for s in statuses),
            passivations=sum(s.passivations for s in statuses),
            mcp_servers=servers,
        )


class Agents(Protocol):
    async def ask(self, message: Message[R]) -> R:
        """Hand a message to its agent's writer; its reply once what the writer recorded is
        committed (an error the writer raised, e.g. UnknownAgent, is raised here as itself)."""
        ...

    def events(self, run_id: str, *, timeout_s: float = 600.0) -> AsyncIterator[ev.LedgerEvent]:
        """The run's events as they are committed, until its end event."""
        ...

    async def status(self, agent_id: str | None = None) -> HostStatus:
        """The hosted agents (one agent's host, or every host), read while runs are in flight."""
        ...

    async def close(self) -> None:
        """Stop hosting: a run in flight ends as cancelled (RunTerminated); runs accepted but not
        started are durable and run on the agent's next activation."""
        ...
