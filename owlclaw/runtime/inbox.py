"""The writer's inbox: the messages that change an agent, each recorded as its one writer.

A message that records a fact needs only the agent's head (registered on first use); the full
preparation (app reload, rate limits, budget) belongs to the start of a run, and to ``load``,
which activates the agent.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from events import catalog as ev
from events.agent import Agent
from events.agent_state import AGENT_MESSAGE
from events.streams import now
from owlclaw import tracing
from owlclaw.messages import (
    AgentMessage,
    AgentReply,
    AnswerApproval,
    ApprovalAnswer,
    CancelSchedule,
    ChangeTools,
    ExpireApprovals,
    Fire,
    FireOutcome,
    Receive,
    SubAgentFinished,
    Submit,
    ToolsChange,
)
from owlclaw.runtime.agent_setup import AgentSetup
from owlclaw.runtime.approvals import checked_edit, record_decision, spawn_kin
from owlclaw.runtime.commits import Sink
from owlclaw.runtime.serial import LedgerCalls
from owlclaw.tools.agent_mail import CONTEXT_KEY, SOURCE_PREFIX, reply_of
from owlclaw.tools.subagents import SubAgents


class Inbox:
    """One agent's writer messages (``owlclaw.messages``), by the operation's name."""

    def __init__(self, setup: AgentSetup, sink: Sink, io: LedgerCalls, subagents: SubAgents | None):
        self.setup = setup
        self.sink = sink
        self.io = io
        self.subagents = subagents

    async def _head(self) -> Agent:
        return await self.io(self.setup.head)

    async def submit(self, message: Submit) -> tuple[UUID, ev.RunQueued | None]:
        """Accept a run: RunQueued is committed at once (its id is final and it survives a
        crash); ``AgentRuntime.run_queued`` executes it later, in queue order. With an
        idempotency key the agent already accepted, nothing is recorded: the earlier run's id,
        and None."""
        agent = await self._head()
        key = message.idempotency_key
        if key is not None and (known := agent.run_for_key(key)):
            return known, None
        context = message.context
        if message.traceparent is not None:
            context = {**(context or {}), tracing.TRACEPARENT: message.traceparent}
        queued = agent.queue_run(
            message.trigger,
            message.focus,
            message.payload,
            context,
            idempotency_key=key,
            by=message.by,
        )
        await self.sink.append(agent)
        return queued.run_id, queued

    async def fire(self, fire: Fire) -> tuple[FireOutcome, ev.RunQueued | None]:
        """Judge a timer delivery and commit the verdict: TimerFired with its run's RunQueued
        (one commit: a fire is never recorded without its run, and at most once), or
        TimerDeduplicated / TimerMissed. The run then executes through ``run_queued``."""
        agent = await self._head()
        kind, reason, queued = agent.receive_fire(
            fire.schedule_id, fire.fire_time, fire.missed, fire.occurrences, fire.first_fire_time
        )
        await self.sink.append(agent)
        run_id = str(queued.run_id) if queued is not None else None
        return FireOutcome(kind, reason, run_id), queued

    async def receive(self, message: Receive) -> int:
        """Record an inbound event for the next heartbeat; its log position."""
        agent = await self._head()
        agent.record(
            ev.InboundReceived, source=message.source, payload=message.payload, by=message.by
        )
        return (await self.sink.append(agent))[1][-1]

    async def agent_message(self, message: AgentMessage) -> tuple[UUID | None, ev.RunQueued | None]:
        """Record another agent's message (InboundReceived from ``agent:<sender>``) and, in the
        same commit, queue the run it starts (trigger ``agent_message``, keyed by the message
        id), unless no reply is expected and the app leaves messages to its heartbeat. A message
        that already started a run records nothing: that run's id, and None."""
        agent = await self._head()
        if known := agent.run_for_key(message.message_id):
            return known, None
        payload = {**message.link(), "text": message.text}
        agent.record(
            ev.InboundReceived, source=f"{SOURCE_PREFIX}{message.from_agent_id}", payload=payload
        )
        app = self.setup.app
        queued = None
        if message.expect_reply or app is None or app.settings.on_message == "run":
            asks = "; your answer is your reply" if message.expect_reply else ""
            queued = agent.queue_run(
                AGENT_MESSAGE,
                f"a message from agent {message.from_agent_id}{asks}",
                context={CONTEXT_KEY: message.link()},
                idempotency_key=message.message_id,
            )
        await self.sink.append(agent)
        return (queued.run_id if queued else None), queued

    async def agent_replied(self, reply: AgentReply) -> list[UUID]:
        """Record the reply to a message this agent's run sent (AgentReplyReceived); the run
        that waits for it, to resume. A reply already recorded (or given up) records nothing."""
        agent = await self._head()
        known = agent.state.replies.get(reply.message_id)
        if known is not None and known.answered:
            return []
        agent.record(ev.AgentReplyReceived, **reply.event_fields())
        await self.sink.append(agent)
        return [reply.run_id]

    async def change_tools(self, message: ChangeTools) -> ToolsChange:
        """Enable and disable tools as the agent's writer (ToolsChanged), checked against the
        tools of its app as last loaded; from the next run on, governance hides disabled ones."""
        agent = await self._head()
        agent_id = self.setup.agent_id
        await self.setup.connect_mcp()  # its MCP servers' tools are among those it may name
        known = list(self.setup.tools())
        if agent.change_tools(message.enable, message.disable, known, by=message.by) is None:
            return ToolsChange(agent_id, list(agent.state.disabled_tools))
        # a ToolsChanged commutes with any fact appended meanwhile (a run's schedule): rebase
        agent, positions = await self.sink.append(agent, over=None)
        return ToolsChange(agent_id, list(agent.state.disabled_tools), positions[-1])

    async def cancel_schedule(self, message: CancelSchedule) -> int:
        """Cancel an active schedule as the agent's writer (ScheduleCancelled naming ``by``);
        the timer service then removes its timer from the backend. UnknownSchedule (nothing
        recorded) when it is not active. The log position of the cancel."""
        agent = await self._head()
        agent.cancel_schedule(message.schedule_id, message.by, message.reason)
        return (await self.sink.append(agent))[1][-1]

    async def answer_approval(self, message: AnswerApproval) -> ApprovalAnswer:
        """Record a person's answer as the agent's writer. ApprovalClosed (nothing to answer,
        another digest, an agent of its spawn tree answering, a second grant by the same
        principal) or ToolArgumentsInvalid (edited arguments outside the tool's schema):
        nothing recorded. The run to resume is in the answer."""
        decision = message.decision
        agent = await self._head()
        await self.setup.connect_mcp()  # the call may be to a tool of one of its MCP servers
        checked_edit(agent, decision, self.setup.tools())
        kin = await self.io(spawn_kin, self.setup.ledger, self.setup.agent_id, decision.by)
        approval = record_decision(agent, decision, kin)
        agent, positions = await self.sink.append(agent)
        return ApprovalAnswer.of(agent, decision.approval_id, approval.run_id, positions[-1])

    async def expire_approvals(self, _: ExpireApprovals) -> list[UUID]:
        """Record ApprovalExpired for this agent's overdue approvals, and ``no_reply`` for the
        replies its runs await past their deadline; the runs to resume."""
        agent = await self._head()
        at = now()
        runs = agent.expire_approvals(at) + agent.expire_replies(at)
        if runs:
            await self.sink.append(agent)
        return runs

    async def subagent_finished(self, report: SubAgentFinished) -> list[UUID]:
        """Record a sub-agent's end as this agent's writer (SubAgentFinished; for a spawn that
        does not wait, also an InboundReceived for the heartbeat); the waiting run to resume."""
        agent = await self._head()
        known = agent.state.spawns.get(report.spawn_id)
        if known is not None and known.finished:
            return []
        fields = report.event_fields()
        agent.record(ev.SubAgentFinished, **fields)
        if not report.wait:
            told = msgspec.to_builtins({"parent_agent_id": report.agent_id, **fields})
            agent.record(ev.InboundReceived, source="subagent", payload=told)
        await self.sink.append(agent)
        return [report.run_id] if report.wait else []

    async def reconcile_spawns(self) -> list[UUID]:
        """Record the end of sub-agent runs that ended without their report reaching this
        agent (the child's host died between its end and the report); runs to resume."""
        agent = await self._head()
        resume: list[UUID] = []
        for spawn in list(agent.state.spawns.values()):
            if spawn.finished or self.subagents is None:
                continue
            report = await self.subagents.ended(spawn.child_run_id)
            if report is not None:
                resume += await self.subagent_finished(report)
        return resume

    async def reconcile_replies(self) -> list[UUID]:
        """Record the replies to this agent's messages whose answering run ended without the
        reply reaching this agent (the target's host died in between); runs to resume."""
        agent = await self._head()
        resume: list[UUID] = []
        for awaited in list(agent.state.replies.values()):
            if awaited.answered or awaited.to_run_id is None:
                continue
            reply = await self.io(reply_of, self.setup.ledger, awaited.to_run_id)
            if reply is not None:
                resume += await self.agent_replied(reply)
        return resume

    async def load(self, loaded: Agent | None = None) -> None:
        """Load the agent and its app now, committing what that recorded (IdentityLoaded,
        AppLoadFailed), so a host activating the agent shows a broken app before any run.
        ``loaded``: the agent as the caller just loaded it, checked by its head, not reloaded."""
        if loaded is not None:
            self.setup.writer.seen(loaded)
        agent = await self.io(self.setup.prepare)
        if agent.pending_events:
            await self.sink.append(agent)
