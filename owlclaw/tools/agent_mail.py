"""Messages between agents (send_to_agent): what the tool needs of the world, and the reply a
run started by a message sends back.

A message goes to its target's own writer (``AgentMessage``), recorded there as an inbound
event. When it expects a reply, the run it starts answers it: once that run has ended, its host
tells the sender (``AgentReply``), whose waiting run resumes, as a sub-agent's end resumes its
parent. A message carries the row hash of the sender's recorded call, a reply the row hash of
the run's end, so ``owlclaw verify`` can check both links.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

from events import Ledger, UnknownAgent
from events import catalog as ev
from events.agent import Agent
from owlclaw.agents import Agents
from owlclaw.messages import AgentMessage, AgentReply
from owlclaw.tools.subagents import ended_as

CONTEXT_KEY = "agent_message"
"""Where a run started by a message keeps the message's link (everything but its text)."""
SOURCE_PREFIX = "agent:"
"""An InboundReceived from another agent has source ``agent:<its id>``."""


class RequestNotCommitted(RuntimeError):
    """The call's ToolCallRequested is not in the ledger (the write-ahead was skipped)."""


class AgentMail:
    """What send_to_agent needs of the world: the ledger (targets, the sender's row hash, the
    run's hop count) and the agents (delivery through the target's writer)."""

    def __init__(self, ledger: Ledger, agents: Agents):
        self.ledger = ledger
        self.agents = agents

    async def exists(self, agent_id: str) -> bool:
        try:
            await asyncio.to_thread(self.ledger.load_agent, agent_id)
        except UnknownAgent:
            return False
        return True

    async def origin(self, agent: Agent, run_id: UUID, call_id: str) -> tuple[int, int, str]:
        """(hops that led to this run, the version of the call's ToolCallRequested, its row
        hash in hex). Called once the request is committed (write-ahead)."""
        events = await asyncio.to_thread(self.ledger.stream, run_id)
        request = next(
            (e for e in events if isinstance(e, ev.ToolCallRequested) and e.call_id == call_id),
            None,
        )
        if request is None:
            raise RequestNotCommitted(f"call {call_id} of run {run_id} has no committed request")
        key = (run_id, request.originator_version)
        hashes = await asyncio.to_thread(self.ledger.chains.event_hashes, [key])
        start = next(e for e in events if isinstance(e, ev.RunStarted))
        return await self._hops(agent, start), request.originator_version, hashes[key].hex()

    async def _hops(self, agent: Agent, start: ev.RunStarted) -> int:
        """How many messages led to a run: its message's count (a run a message started), or
        the most among the agents' messages it was given (a heartbeat's); 0 for any other."""
        link = start.context.get(CONTEXT_KEY)
        counts = [int(link["hops"])] if link else []
        if start.inbound:
            given = await asyncio.to_thread(self.ledger.agent_events_at, agent, start.inbound)
            counts += [
                int(e.payload.get("hops", 0))
                for e in given
                if isinstance(e, ev.InboundReceived) and e.source.startswith(SOURCE_PREFIX)
            ]
        return max(counts, default=0)

    async def send(self, message: AgentMessage) -> UUID | None:
        """Deliver through the target's writer; the run it started (None: left for its
        heartbeat)."""
        run_id = await self.agents.ask(message)
        return UUID(run_id) if run_id else None

    async def reply(self, agent: Agent, version: int) -> ev.AgentReplyReceived:
        """The AgentReplyReceived at ``version`` of the agent's stream."""
        found = await asyncio.to_thread(self.ledger.agent_events_at, agent, [version])
        event = found[0]
        assert isinstance(event, ev.AgentReplyReceived)
        return event


def reply_of(ledger: Ledger, run_id: UUID) -> AgentReply | None:
    """The ended run's reply to the message that started it (None: no message started it, the
    message expected no reply, or the run has not ended)."""
    events = ledger.stream(run_id)
    start = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    end = next((e for e in events if isinstance(e, ev.RunEnded)), None)
    link = start.context.get(CONTEXT_KEY) if start is not None else None
    if start is None or end is None or not link or not link.get("expect_reply"):
        return None
    status, told = ended_as(end)
    key = (run_id, end.originator_version)
    row_hash = ledger.chains.event_hashes([key]).get(key)
    return AgentReply(
        agent_id=link["from_agent_id"],
        message_id=link["message_id"],
        run_id=UUID(link["from_run_id"]),
        call_id=link["call_id"],
        from_agent_id=start.agent_id,
        status=status,
        reply=told,
        from_run_id=run_id,
        reply_version=end.originator_version,
        reply_hash=row_hash.hex() if row_hash is not None else "",
    )
