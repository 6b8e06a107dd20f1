"""What a tool is: a spec (schema, metadata) and ``execute(params, ctx)``.

Built-in tools and an app's ``@registry.capability`` handlers are both ``Tool``s in one table,
so the executor calls every tool the same way.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.states import States

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from events.agent import Agent
    from events.run import Run
    from owlclaw.app import Skill
    from owlclaw.config import RuntimeConfig
    from owlclaw.tools.agent_mail import AgentMail
    from owlclaw.tools.subagents import SubAgents
    from owlclaw.tools.threads import HandlerThreads
    from projections.recall import MemoryStore


@dataclass(frozen=True)
class RunScope:
    """What the built-in tools act on: the agent and run aggregates (their effects are events
    recorded there and committed with the call's outcome), the app's state providers, memory."""

    agent: Agent
    run: Run
    states: States
    memory: MemoryStore | None
    committed_position: Callable[[], Awaitable[int]]
    """The log position of the run's last commit, once the commit in flight (if any) is done:
    recall waits for the view to reach it, so it sees every memory recorded before its call."""
    threads: HandlerThreads
    """Where synchronous handlers run, off the event loop."""
    limits: RuntimeConfig
    """The runtime's limits (the memory limit, recall's similarity floor)."""
    skills: Mapping[str, Skill]
    """The app's skills by name, for load_skill."""
    store_blob: Callable[[bytes, str], Awaitable[str]]
    """Keeps bytes (with their media type) in the ledger's blob store, off the event loop;
    their sha256: where an MCP tool's images go before its outcome is recorded."""
    subagents: SubAgents | None = None
    """Where spawn_agent starts sub-agents (None: the runtime has no host to place them)."""
    mail: AgentMail | None = None
    """Where send_to_agent delivers messages (None: the runtime has no host)."""


@dataclass(frozen=True)
class ToolContext:
    """What a call knows about itself. A capability handler receives it by declaring a
    parameter annotated ``ToolContext``."""

    agent_id: str
    run_id: uuid.UUID
    call_id: str
    idempotency_key: str
    """Stable for this call across a crash and resume: send it to outside systems so a
    repeated call does not repeat its effect."""
    logger: logging.Logger
    scope: RunScope


def idempotency_key(run_id: uuid.UUID, call_id: str) -> str:
    """The same (run, call) gives the same key; the call id comes from the recorded model
    response, which a resumed run serves again."""
    return str(uuid.uuid5(run_id, call_id))


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def execute(self, params: Any, ctx: ToolContext) -> Any:
        """The tool's result (JSON-able), or a ToolError; exceptions are classified by the
        executor. ``params``: what ``spec.parse`` made of the arguments (the typed parameters,
        or the arguments a JSON schema accepted)."""
        ...
