"""Hosting agents in one process: per agent a FIFO mailbox drained by one task.

The in-process implementation of ``owlclaw.agents.Agents``, and the core of the Ray agent actor.
A host holds one agent (``dedicated`` placement) or many (``shared``); either way each agent's
runs execute one at a time in acceptance order. Accepting a run — a trigger, or a timer fire
the agent judged a fire — commits its RunQueued first, so the returned run id is final and a
queued run survives a crash: on activation, a run interrupted mid-way is resumed from its
recorded steps, then runs queued but never started are executed.
An agent idle for ``idle_s`` is passivated (its runtime released); its state lives in the ledger,
so the next message re-activates it from snapshot + tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from events import Ledger, StreamConflict
from events import catalog as ev
from events.ledger import CONNECTIONS
from owlclaw.agents import AgentActivity, Agents, HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.llm.scripted import load_script_dir
from owlclaw.messages import (
    Activate,
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
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Completer, LiteLLM
from owlclaw.tools.subagents import report_of
from projections.feed import afollow_run
from projections.recall import MemoryStore

R = TypeVar("R")
log = logging.getLogger("owlclaw.host")
LEDGER_THREADS = CONNECTIONS
"""A host's threads for its agents' ledger calls: as many as the ledger has connections."""
Mail = tuple[str, Any, "asyncio.Future[RunResult]"]
"""("run", RunQueued, result) or ("resume", run id, result)."""


class RunCancelled(Exception):
    """The run was cancelled while it ran; it ended with RunTerminated ("cancelled")."""


@dataclass
class _Hosted:
    runtime: AgentRuntime
    mailbox: asyncio.Queue[Mail] = field(default_factory=asyncio.Queue)
    consumer: asyncio.Task[None] | None = None
    results: dict[str, asyncio.Future[RunResult]] = field(default_factory=dict)
    accepting: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a run is accepted, so mailbox order is acceptance (run number) order."""
    running: str | None = None
    current: asyncio.Task[Any] | None = None
    last_active: float = field(default_factory=time.monotonic)
    completed: int = 0


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
        self.idle_s = idle_s
        if config.runtime.scripts_dir:
            load_script_dir(Path(config.runtime.scripts_dir))
        self.memory = memory
        """Recall for the hosted agents (None: recall answers MEMORY_UNAVAILABLE)."""
        self.llm = llm or LiteLLM()  # seconds to import: at start-up, not in the first run
        """Where the hosted agents' models are asked: litellm here, or the node's."""
        self._ledger_threads = ThreadPoolExecutor(LEDGER_THREADS, thread_name_prefix="ledger")
        """Where the hosted agents' ledger calls run, each agent's in its order."""
        self._agents: dict[str, _Hosted] = {}
        self._activating: dict[str, asyncio.Lock] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        self.activations = 0
        self.passivations = 0
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
    async def _writer(self, agent_id: str) -> AsyncIterator[_Hosted]:
        """The agent's hosted copy, held for one write through its runtime under its accepting
        lock (so mailbox order is acceptance order); a conflict stands this copy down."""
        while True:
            hosted = await self._active(agent_id)
            await hosted.accepting.acquire()
            if self._agents.get(agent_id) is hosted:
                break
            hosted.accepting.release()  # passivated meanwhile: activate again
        try:
            yield hosted
        except StreamConflict:
            self._stand_down(agent_id, hosted)
            raise
        finally:
            hosted.accepting.release()

    async def _submit(self, message: Submit) -> str:
        """Accept a run; its id once RunQueued is committed."""
        async with self._writer(message.agent_id) as hosted:
            run_id, queued = await hosted.runtime.inbox.submit(message)
            if queued is not None:
                self._enqueue(hosted, queued)
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
            )
        )
        return await self._result(Result(agent_id=message.agent_id, run_id=run_id))

    async def _fire(self, fire: Fire) -> FireOutcome:
        """Judge a timer delivery; a fire's run joins the mailbox like any accepted run."""
        async with self._writer(fire.agent_id) as hosted:
            outcome, queued = await hosted.runtime.inbox.fire(fire)
            if queued is not None:
                self._enqueue(hosted, queued)
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
        """Record a person's answer; the parked run resumes."""
        async with self._writer(message.agent_id) as hosted:
            answer = await hosted.runtime.inbox.answer_approval(message)
            self._resume(hosted, uuid.UUID(answer.run_id))
            return answer

    async def _expire_approvals(self, message: ExpireApprovals) -> int:
        """Expire the agent's overdue approvals; their runs resume (each parked call denied)."""
        async with self._writer(message.agent_id) as hosted:
            runs = await hosted.runtime.inbox.expire_approvals(message)
            for run_id in runs:
                self._resume(hosted, run_id)
            return len(runs)

    async def _subagent_finished(self, report: SubAgentFinished) -> None:
        """Record a sub-agent's end; a run waiting for it resumes."""
        async with self._writer(report.agent_id) as hosted:
            for run_id in await hosted.runtime.inbox.subagent_finished(report):
                self._resume(hosted, run_id)

    async def _report_end(self, run_id: str) -> None:
        """A sub-agent's ended run is reported to its parent; a report that does not arrive
        (the parent's host is gone) is reconciled when the parent is activated again."""
        events = await asyncio.to_thread(self.ledger.stream, uuid.UUID(run_id))
        report = report_of(events)
        if report is None:
            return
        try:
            await self.agents.ask(report)
        except Exception:
            log.exception("reporting the end of sub-agent run %s to %s", run_id, report.agent_id)

    async def _result(self, message: Result) -> RunResult:
        """Wait for an accepted run to end. A run that ended before this host (re)started is
        answered from the ledger."""
        hosted = await self._active(message.agent_id)
        future = hosted.results.get(message.run_id)
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
        await self._active(message.agent_id)
        return (time.perf_counter() - began) * 1000

    async def _cancel(self, message: Cancel) -> bool:
        """Cancel the agent's run — running, or parked (it ends with RunTerminated) — and the
        sub-agent runs it started that have not ended."""
        agent_id, run_id = message.agent_id, message.run_id
        running = self._cancel_running(agent_id, run_id)
        cancelled = running is not None
        if running is not None:
            # Its end commits as the task stops, with what it recorded but had not committed
            # (the SubAgentSpawned of the child it started last): read the spawns after that.
            await asyncio.wait([running])
        else:
            async with self._writer(agent_id) as hosted:
                cancelled = await hosted.runtime.end_parked(uuid.UUID(run_id))
        if cancelled:
            agent = await asyncio.to_thread(self.ledger.load_agent, agent_id)
            for spawn in list(agent.state.spawns.values()):
                if str(spawn.run_id) == run_id and not spawn.finished:
                    child = Cancel(agent_id=spawn.child_agent_id, run_id=str(spawn.child_run_id))
                    await self.agents.ask(child)
        return cancelled

    def _cancel_running(self, agent_id: str, run_id: str) -> asyncio.Task[RunResult] | None:
        """The agent's running task for ``run_id``, cancelled; None when it is not running (or
        has just finished: parked, not yet collected, so ``end_parked`` ends it)."""
        hosted = self._agents.get(agent_id)
        if hosted is None or hosted.running != run_id or hosted.current is None:
            return None
        task = hosted.current
        return task if task.cancel() else None

    async def status(self, agent_id: str | None = None) -> HostStatus:
        return self.status_now(agent_id)

    def status_now(self, agent_id: str | None = None) -> HostStatus:
        """What this host holds; answers while runs are in flight (reads plain fields only)."""
        agents = {
            a: AgentActivity(
                queued=h.mailbox.qsize(),
                running=h.running,
                completed=h.completed,
                idle_s=round(time.monotonic() - h.last_active, 3),
            )
            for a, h in list(self._agents.items())
            if agent_id is None or a == agent_id
        }
        return HostStatus(agents, self.activations, self.passivations)

    # --- activation and passivation ---------------------------------------------------------

    async def _active(self, agent_id: str) -> _Hosted:
        """The agent's hosted copy, activated (rebuilt from the ledger) if it was not."""
        hosted = self._agents.get(agent_id)
        if hosted is not None:
            hosted.last_active = time.monotonic()
            return hosted
        async with self._activating.setdefault(agent_id, asyncio.Lock()):
            hosted = self._agents.get(agent_id)
            if hosted is None:  # nobody activated it while this call waited
                hosted = await self._recover(agent_id)
                self._agents[agent_id] = hosted  # visible only once its recovery is queued
        return hosted

    async def _recover(self, agent_id: str) -> _Hosted:
        """A hosted agent rebuilt from the ledger: an interrupted run first, then runs accepted
        but never started, then whatever arrives."""
        agent = await asyncio.to_thread(self.ledger.load_agent, agent_id)  # UnknownAgent
        runtime = AgentRuntime(
            self.ledger,
            agent_id,
            models=list(self.config.runtime.models),
            app_dir=Path(agent.state.app_dir) if agent.state.app_dir else None,
            memory=self.memory,
            limits=self.config.runtime,
            workspaces=self.config.workspaces_path,
            agents=self.agents,
            llm=self.llm,
            ledger_threads=self._ledger_threads,
        )
        try:
            # a broken app is recorded now, bounded by its time limit
            await runtime.inbox.load(agent)
        except BaseException:
            runtime.close()
            raise
        hosted = _Hosted(runtime)
        self.activations += 1
        interrupted = await asyncio.to_thread(self.ledger.interrupted_run, agent)
        if interrupted is not None:
            self._resume(hosted, interrupted)
        expired = await runtime.inbox.expire_approvals(ExpireApprovals(agent_id=agent_id))
        open_spawns = any(not spawn.finished for spawn in agent.state.spawns.values())
        if expired or (open_spawns and await runtime.inbox.reconcile_spawns()):
            agent = await asyncio.to_thread(self.ledger.load_agent, agent_id)
        for answered in await asyncio.to_thread(self.ledger.answered_parked_runs, agent):
            self._resume(hosted, answered)
        for queued in await asyncio.to_thread(self.ledger.unstarted_runs, agent):
            self._enqueue(hosted, queued)
        hosted.consumer = asyncio.create_task(self._drain(agent_id, hosted))
        return hosted

    def _resume(self, hosted: _Hosted, run_id: uuid.UUID) -> None:
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        hosted.results[str(run_id)] = future
        hosted.mailbox.put_nowait(("resume", run_id, future))

    def _enqueue(self, hosted: _Hosted, queued: ev.RunQueued) -> None:
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        hosted.results[str(queued.run_id)] = future
        hosted.mailbox.put_nowait(("run", queued, future))

    async def _drain(self, agent_id: str, hosted: _Hosted) -> None:
        while True:
            try:
                kind, message, future = await asyncio.wait_for(hosted.mailbox.get(), self.idle_s)
            except TimeoutError:
                if hosted.mailbox.empty() and not hosted.accepting.locked():
                    self._passivate(agent_id, hosted)
                    return
                continue
            hosted.last_active = time.monotonic()
            if kind == "run":
                hosted.running = str(message.run_id)
                hosted.current = asyncio.create_task(hosted.runtime.run_queued(message))
            else:
                hosted.running = str(message)
                hosted.current = asyncio.create_task(hosted.runtime.resume(message))
            try:
                future.set_result(await hosted.current)
            except asyncio.CancelledError:
                consumer = asyncio.current_task()
                if not hosted.current.cancelled() or (consumer and consumer.cancelling()):
                    raise  # the host is closing (the run was cancelled with it), not the run alone
                if kind == "run":  # cancelled before its first step: it still ends once
                    await hosted.runtime.end_cancelled(message)
                future.set_exception(RunCancelled(f"{kind} {message} was cancelled"))
            except StreamConflict as error:  # another actor writes this agent: stop here
                future.set_exception(error)
                self._stand_down(agent_id, hosted)
                return
            except Exception as error:
                future.set_exception(error)
            finally:
                ran, hosted.running, hosted.current = hosted.running, None, None
                hosted.completed += 1
                hosted.last_active = time.monotonic()
            if hosted.runtime.parent_agent_id and ran is not None:
                await self._report_end(ran)

    def _stand_down(self, agent_id: str, hosted: _Hosted) -> None:
        """Another writer appended to this agent's stream first (two actors for one agent after
        a failover race): drop this copy and its queue; the ledger keeps the winner's."""
        for _, _, future in _drain_queue(hosted.mailbox):
            future.set_exception(StreamConflict(f"agent {agent_id} is written by another actor"))
        if self._agents.get(agent_id) is hosted:
            del self._agents[agent_id]
        consumer = hosted.consumer
        if consumer is not None and consumer is not asyncio.current_task():
            consumer.cancel()
        retiring = asyncio.create_task(self._retire(hosted))
        self._retiring.add(retiring)
        retiring.add_done_callback(self._retiring.discard)

    async def _retire(self, hosted: _Hosted) -> None:
        """Close a stood-down copy once nothing uses it: an accepting call or a run may still
        be in flight on its runtime."""
        async with hosted.accepting:
            if hosted.consumer is not None and hosted.consumer is not asyncio.current_task():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await hosted.consumer
            hosted.runtime.close()

    def _passivate(self, agent_id: str, hosted: _Hosted) -> None:
        if self._agents.get(agent_id) is hosted:
            del self._agents[agent_id]
            hosted.runtime.close()
            self.passivations += 1

    async def close(self) -> None:
        for hosted in list(self._agents.values()):  # a consumer may passivate as it stops
            if hosted.consumer is not None:
                hosted.consumer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await hosted.consumer
            hosted.runtime.close()
        self._agents.clear()
        self._ledger_threads.shutdown(wait=True)


def _drain_queue(mailbox: asyncio.Queue[Mail]) -> list[Mail]:
    items = []
    while not mailbox.empty():
        items.append(mailbox.get_nowait())
    return items
