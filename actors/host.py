"""Hosting agents in one process: per agent a FIFO mailbox drained by one task.

The in-process implementation of ``owlclaw.agents.Agents``, and the core of the Ray agent actor.
A host holds one agent (``dedicated`` placement) or many (``shared``); either way each agent's
runs execute one at a time in acceptance order. Accepting a run — a trigger, or a timer fire
the agent judged a fire — commits its RunQueued first, so the returned run id is final and a
queued run survives a crash: on activation, a run interrupted mid-way is resumed from its
recorded steps, then runs queued but never started are executed.
An agent idle for ``idle_s`` is passivated (its runtime released); its state lives in the ledger,
so the next message re-activates it from snapshot + tail. This module hands each message to its
handler; the hosted agents' lifecycle (activation, mailboxes, passivation) is ``actors.hosted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from actors.hosted import Hosted, HostedAgents, RunCancelled
from events import Ledger, StreamConflict
from events import catalog as ev
from owlclaw.agents import Agents, HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.llm.scripted import load_script_dir
from owlclaw.mcp.pool import McpPool
from owlclaw.messages import (
    Activate,
    AgentMessage,
    AgentReply,
    AnswerApproval,
    ApprovalAnswer,
    Cancel,
    CancelSchedule,
    ChangeTools,
    ExpireApprovals,
    Fire,
    FireOutcome,
    Message,
    Receive,
    Result,
    RunResult,
    SubAgentFinished,
    Submit,
    SubmitAndWait,
    ToolsChange,
)
from owlclaw.runtime.models import Completer, LiteLLM
from projections.feed import afollow_run
from projections.recall import MemoryStore

R = TypeVar("R")


class AgentHost:
    def __init__(
        self,
        ledger: Ledger,
        config: OwlClawConfig,
        *,
        idle_s: float | None = None,
        memory: MemoryStore | None = None,
        agents: Agents | None = None,
        llm: Completer | None = None,
    ):
        self.ledger = ledger
        self.agents: Agents = agents or self
        """Where the hosted agents' sub-agents live, and where a sub-agent reports its end:
        this host, or the Ray directory when it runs in an actor."""
        self.config = config
        if config.runtime.scripts_dir:
            load_script_dir(Path(config.runtime.scripts_dir))
        self.mcp = McpPool()
        """This host's connections to its agents' MCP servers: one per server, opened when a
        run first needs it, closed with the host."""
        self.hosted = HostedAgents(
            ledger,
            config,
            idle_s=idle_s,
            memory=memory,  # recall for the hosted agents (None: MEMORY_UNAVAILABLE)
            agents=self.agents,
            llm=llm or LiteLLM(),  # seconds to import: at start-up, not in the first run
            mcp=self.mcp,
        )
        """The hosted agents: activated on their first message, passivated when idle."""
        self._handlers: dict[type[Message[Any]], Callable[[Any], Awaitable[Any]]] = {
            Submit: self._submit,
            SubmitAndWait: self._submit_and_wait,
            Result: self._result,
            Fire: self._fire,
            Receive: self._receive,
            ChangeTools: self._change_tools,
            CancelSchedule: self._cancel_schedule,
            AnswerApproval: self._answer_approval,
            ExpireApprovals: self._expire_approvals,
            SubAgentFinished: self._subagent_finished,
            AgentMessage: self._agent_message,
            AgentReply: self._agent_reply,
            Cancel: self._cancel,
            Activate: self._activate,
        }
        """What ``ask`` does with each message: one handler per message class."""

    # --- messages -------------------------------------------------------------------------

    async def ask(self, message: Message[R]) -> R:
        """Hand a message to its handler (``_handlers``: one per message class)."""
        reply: R = await self._handlers[type(message)](message)
        return reply

    @contextlib.asynccontextmanager
    async def _writer(self, agent_id: str) -> AsyncIterator[Hosted]:
        """The agent's hosted copy, held for one write through its runtime under its accepting
        lock (so mailbox order is acceptance order); a conflict stands this copy down."""
        while True:
            hosted = await self.hosted.active(agent_id)
            await hosted.accepting.acquire()
            if self.hosted.get(agent_id) is hosted:
                break
            hosted.accepting.release()  # passivated meanwhile: activate again
        try:
            yield hosted
        except StreamConflict:
            self.hosted.stand_down(agent_id, hosted)
            raise
        finally:
            hosted.accepting.release()

    async def _submit(self, message: Submit) -> str:
        """Accept a run; its id once RunQueued is committed."""
        async with self._writer(message.agent_id) as hosted:
            run_id, queued = await hosted.runtime.inbox.submit(message)
            if queued is not None:
                self.hosted.enqueue(hosted, queued)
            return str(run_id)

    async def _submit_and_wait(self, message: SubmitAndWait) -> RunResult:
        """Accept a run and wait for it."""
        run_id = await self._submit(
            Submit(
                agent_id=message.agent_id,
                trigger=message.trigger,
                focus=message.focus,
                payload=message.payload,
                context=message.context,
                by=message.by,
            )
        )
        return await self._result(Result(agent_id=message.agent_id, run_id=run_id))

    async def _fire(self, fire: Fire) -> FireOutcome:
        """Judge a timer delivery; a fire's run joins the mailbox like any accepted run."""
        async with self._writer(fire.agent_id) as hosted:
            outcome, queued = await hosted.runtime.inbox.fire(fire)
            if queued is not None:
                self.hosted.enqueue(hosted, queued)
            return outcome

    async def _receive(self, message: Receive) -> int:
        async with self._writer(message.agent_id) as hosted:
            return await hosted.runtime.inbox.receive(message)

    async def _change_tools(self, message: ChangeTools) -> ToolsChange:
        async with self._writer(message.agent_id) as hosted:
            return await hosted.runtime.inbox.change_tools(message)

    async def _cancel_schedule(self, message: CancelSchedule) -> int:
        async with self._writer(message.agent_id) as hosted:
            return await hosted.runtime.inbox.cancel_schedule(message)

    async def _answer_approval(self, message: AnswerApproval) -> ApprovalAnswer:
        """Record a person's answer; the parked run resumes once the approval is no longer
        pending (a grant short of the approvers required leaves it parked)."""
        async with self._writer(message.agent_id) as hosted:
            answer = await hosted.runtime.inbox.answer_approval(message)
            if answer.status != "pending":
                self.hosted.resume(hosted, uuid.UUID(answer.run_id))
            return answer

    async def _expire_approvals(self, message: ExpireApprovals) -> int:
        """Expire the agent's overdue approvals; their runs resume (each parked call denied)."""
        async with self._writer(message.agent_id) as hosted:
            runs = await hosted.runtime.inbox.expire_approvals(message)
            for run_id in runs:
                self.hosted.resume(hosted, run_id)
            return len(runs)

    async def _subagent_finished(self, report: SubAgentFinished) -> None:
        """Record a sub-agent's end; a run waiting for it resumes."""
        async with self._writer(report.agent_id) as hosted:
            for run_id in await hosted.runtime.inbox.subagent_finished(report):
                self.hosted.resume(hosted, run_id)

    async def _agent_message(self, message: AgentMessage) -> str | None:
        """Record another agent's message; the run it starts joins the mailbox."""
        async with self._writer(message.agent_id) as hosted:
            run_id, queued = await hosted.runtime.inbox.agent_message(message)
            if queued is not None:
                self.hosted.enqueue(hosted, queued)
            return str(run_id) if run_id else None

    async def _agent_reply(self, reply: AgentReply) -> None:
        """Record the reply to a message the agent sent; the run waiting for it resumes."""
        async with self._writer(reply.agent_id) as hosted:
            for run_id in await hosted.runtime.inbox.agent_replied(reply):
                self.hosted.resume(hosted, run_id)

    async def _result(self, message: Result) -> RunResult:
        """Wait for an accepted run to end. A run being accepted is waited for: its RunQueued
        is visible in the ledger before the accepting call has queued it (that call holds the
        accepting lock until it has). A run the ledger has accepted but this copy never queued
        (the database went away as the acceptance committed) is queued now. A run that ended
        before this host (re)started is answered from the ledger."""
        hosted = await self.hosted.active(message.agent_id)
        async with hosted.accepting:
            future = hosted.results.get(message.run_id)
            if future is None:
                future = await self.hosted.queue_unstarted(hosted, message.run_id)
        if future is None:
            return await asyncio.to_thread(self._recorded_result, message.run_id)
        try:
            return await asyncio.shield(future)
        except RunCancelled:
            return await asyncio.to_thread(self._recorded_result, message.run_id)
        except StreamConflict:  # this copy stood down: the run ended or is the new owner's
            return await self._result(message)

    def _recorded_result(self, run_id: str) -> RunResult:
        run = self.ledger.load_run(uuid.UUID(run_id))  # UnknownRun if it does not exist
        if not run.state.ended:
            raise KeyError(f"run {run_id} is neither queued here nor ended")
        return RunResult.of(run)

    def events(self, run_id: str, *, timeout_s: float = 600.0) -> AsyncIterator[ev.LedgerEvent]:
        return afollow_run(self.ledger, run_id, timeout_s=timeout_s)

    async def _activate(self, message: Activate) -> float:
        began = time.perf_counter()
        await self.hosted.active(message.agent_id)
        return (time.perf_counter() - began) * 1000

    async def _cancel(self, message: Cancel) -> bool:
        """Cancel the agent's run — running, or parked (it ends with RunTerminated) — and the
        sub-agent runs it started that have not ended."""
        agent_id, run_id = message.agent_id, message.run_id
        running = self.hosted.cancel_running(agent_id, run_id, message.by)
        cancelled = running is not None
        if running is not None:
            # Its end commits as the task stops, with what it recorded but had not committed
            # (the SubAgentSpawned of the child it started last): read the spawns after that.
            await asyncio.wait([running])
        else:
            async with self._writer(agent_id) as hosted:
                cancelled = await hosted.runtime.end_parked(uuid.UUID(run_id), message.by)
        if cancelled:
            agent = await asyncio.to_thread(self.ledger.load_agent, agent_id)
            for spawn in list(agent.state.spawns.values()):
                if str(spawn.run_id) == run_id and not spawn.finished:
                    child = Cancel(
                        agent_id=spawn.child_agent_id,
                        run_id=str(spawn.child_run_id),
                        by=message.by,
                    )
                    await self.agents.ask(child)
        return cancelled

    async def status(self, agent_id: str | None = None) -> HostStatus:
        return self.status_now(agent_id)

    def status_now(self, agent_id: str | None = None) -> HostStatus:
        """What this host holds; answers while runs are in flight (reads plain fields only)."""
        held = self.hosted.status_now(agent_id)
        return msgspec.structs.replace(held, mcp_servers=self.mcp.connected())

    async def close(self) -> None:
        await self.hosted.close()
        await self.mcp.close()
