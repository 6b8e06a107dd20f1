"""The agents a host holds: their lifecycle, from activation to passivation.

An agent is activated from the ledger when a message first needs it (an interrupted run is
resumed, answered parked runs and queued runs are put in its mailbox), its mailbox is drained by
one task that runs one run at a time, and it is passivated when idle for ``idle_s`` or stood down
when another writer wins its stream. Its own module because this lifecycle is the same whatever
message arrives: ``actors.host`` hands each message to the right runtime, this keeps the runtimes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from events import Ledger, StreamConflict
from events import catalog as ev
from events.agent_state import AGENT_MESSAGE
from events.ledger import CONNECTIONS
from owlclaw.agents import AgentActivity, Agents, HostStatus
from owlclaw.config import OwlClawConfig
from owlclaw.mcp.pool import McpPool
from owlclaw.messages import ExpireApprovals, RunResult
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Completer
from owlclaw.tenants import TenantLimits
from owlclaw.tools.agent_mail import reply_of
from owlclaw.tools.subagents import report_of
from projections.recall import MemoryStore

log = logging.getLogger("owlclaw.host")
LEDGER_THREADS = CONNECTIONS
"""A host's threads for its agents' ledger calls: as many as the ledger has connections."""
Mail = tuple[str, Any, "asyncio.Future[RunResult]"]
"""("run", RunQueued, result) or ("resume", run id, result)."""


class RunCancelled(Exception):
    """The run was cancelled while it ran; it ended with RunTerminated ("cancelled")."""


@dataclass
class Hosted:
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


class HostedAgents:
    """The hosted copies of a host's agents, each with its mailbox and the task draining it."""

    def __init__(
        self,
        ledger: Ledger,
        config: OwlClawConfig,
        *,
        idle_s: float | None,
        memory: MemoryStore | None,
        agents: Agents,
        llm: Completer,
        mcp: McpPool | None = None,
    ):
        self.ledger = ledger
        self.config = config
        self.idle_s = idle_s
        self.memory = memory
        self.agents = agents
        """Where the hosted agents' sub-agents live, and where a sub-agent reports its end."""
        self.llm = llm
        self.mcp = mcp
        """The host's MCP connections, shared by its agents' runs."""
        self.tenants = TenantLimits.on(ledger, config.tenants)
        """The tenants' budgets and run slots, shared with every process serving them."""
        self._ledger_threads = ThreadPoolExecutor(LEDGER_THREADS, thread_name_prefix="ledger")
        """Where the hosted agents' ledger calls run, each agent's in its order."""
        self._agents: dict[str, Hosted] = {}
        self._activating: dict[str, asyncio.Lock] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        self.activations = 0
        self.passivations = 0

    def get(self, agent_id: str) -> Hosted | None:
        """The agent's hosted copy if it is active."""
        return self._agents.get(agent_id)

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

    async def active(self, agent_id: str) -> Hosted:
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

    async def _recover(self, agent_id: str) -> Hosted:
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
            mcp=self.mcp,
            tenant_budget=self.tenants.budget_of(agent_id),
        )
        try:
            # a broken app is recorded now, bounded by its time limit
            await runtime.inbox.load(agent)
        except BaseException:
            runtime.close()
            raise
        hosted = Hosted(runtime)
        self.activations += 1
        interrupted = await asyncio.to_thread(self.ledger.resumable.interrupted_run, agent)
        if interrupted is not None:
            self.resume(hosted, interrupted)
        expired = await runtime.inbox.expire_approvals(ExpireApprovals(agent_id=agent_id))
        open_spawns = any(not spawn.finished for spawn in agent.state.spawns.values())
        awaits = any(not reply.answered for reply in agent.state.replies.values())
        changed = bool(expired)
        if open_spawns:
            changed |= bool(await runtime.inbox.reconcile_spawns())
        if awaits:
            changed |= bool(await runtime.inbox.reconcile_replies())
        if changed:
            agent = await asyncio.to_thread(self.ledger.load_agent, agent_id)
        for answered in await asyncio.to_thread(self.ledger.resumable.answered_parked_runs, agent):
            self.resume(hosted, answered)
        for queued in await asyncio.to_thread(self.ledger.resumable.unstarted_runs, agent):
            self.enqueue(hosted, queued)
        hosted.consumer = asyncio.create_task(self._drain(agent_id, hosted))
        return hosted

    def resume(self, hosted: Hosted, run_id: uuid.UUID) -> None:
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        hosted.results[str(run_id)] = future
        hosted.mailbox.put_nowait(("resume", run_id, future))

    async def queue_unstarted(
        self, hosted: Hosted, run_id: str
    ) -> asyncio.Future[RunResult] | None:
        """Queue ``run_id`` if the ledger has it accepted and never started: an acceptance whose
        commit reached the database but whose answer did not (the call failed, so nothing queued
        it; a retried timer delivery is then a duplicate). None if it is not such a run."""
        agent = await asyncio.to_thread(self.ledger.load_agent, hosted.runtime.agent_id)
        for queued in await asyncio.to_thread(self.ledger.resumable.unstarted_runs, agent):
            if str(queued.run_id) == run_id:
                self.enqueue(hosted, queued)
                return hosted.results[run_id]
        return None

    def enqueue(self, hosted: Hosted, queued: ev.RunQueued) -> None:
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        hosted.results[str(queued.run_id)] = future
        hosted.mailbox.put_nowait(("run", queued, future))

    async def _drain(self, agent_id: str, hosted: Hosted) -> None:
        while True:
            try:
                kind, message, future = await asyncio.wait_for(hosted.mailbox.get(), self.idle_s)
            except TimeoutError:
                if hosted.mailbox.empty() and not hosted.accepting.locked():
                    self._passivate(agent_id, hosted)
                    return
                continue
            hosted.last_active = time.monotonic()
            hosted.running = str(message.run_id) if kind == "run" else str(message)
            hosted.current = asyncio.create_task(self._in_slot(agent_id, hosted, kind, message))
            # once the ledger holds the run's end, a Result asked later is answered from it
            # (AgentHost._result) and the future goes: kept, a busy agent's futures grew by one
            # per run for as long as it stayed active
            in_ledger = False
            try:
                result = await hosted.current
                future.set_result(result)
                in_ledger = result.ended
            except asyncio.CancelledError:
                consumer = asyncio.current_task()
                if not hosted.current.cancelled() or (consumer and consumer.cancelling()):
                    raise  # the host is closing (the run was cancelled with it), not the run alone
                if kind == "run":  # cancelled before its first step: it still ends once
                    await hosted.runtime.end_cancelled(message)
                future.set_exception(RunCancelled(f"{kind} {message} was cancelled"))
                future.exception()  # nobody may wait for it: a cancel is no error to log
                in_ledger = True
            except StreamConflict as error:  # another actor writes this agent: stop here
                future.set_exception(error)
                self.stand_down(agent_id, hosted)
                return
            except Exception as error:
                future.set_exception(error)
            finally:
                ran, hosted.running, hosted.current = hosted.running, None, None
                hosted.completed += 1
                hosted.last_active = time.monotonic()
            if in_ledger and ran is not None and hosted.results.get(ran) is future:
                del hosted.results[ran]
            if ran is not None and (hosted.runtime.parent_agent_id or _may_answer(kind, message)):
                await self._report_end(ran)

    async def _in_slot(self, agent_id: str, hosted: Hosted, kind: str, message: Any) -> RunResult:
        """Run or resume once the agent's tenant has a slot free: the run waits queued till
        then, and gives the slot back as it ends or parks."""
        async with self.tenants.slot(agent_id):
            if kind == "run":
                return await hosted.runtime.run_queued(message)
            return await hosted.runtime.resume(message)

    def stand_down(self, agent_id: str, hosted: Hosted) -> None:
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

    async def _retire(self, hosted: Hosted) -> None:
        """Close a stood-down copy once nothing uses it: an accepting call or a run may still
        be in flight on its runtime."""
        async with hosted.accepting:
            if hosted.consumer is not None and hosted.consumer is not asyncio.current_task():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await hosted.consumer
            hosted.runtime.close()

    def _passivate(self, agent_id: str, hosted: Hosted) -> None:
        if self._agents.get(agent_id) is hosted:
            del self._agents[agent_id]
            hosted.runtime.close()
            self.passivations += 1

    async def _report_end(self, run_id: str) -> None:
        """A sub-agent's ended run is reported to its parent, and a run another agent's message
        started answers it when a reply is expected. A report or reply that does not arrive (the
        other host is gone) is reconciled when its parent or sender is activated again."""
        events = await asyncio.to_thread(self.ledger.stream, uuid.UUID(run_id))
        report = report_of(events)
        reply = await asyncio.to_thread(reply_of, self.ledger, uuid.UUID(run_id))
        for told in (report, reply):
            if told is None:
                continue
            try:
                await self.agents.ask(told)
            except Exception:
                log.exception("telling the end of run %s to %s", run_id, told.agent_id)

    def cancel_running(
        self, agent_id: str, run_id: str, by: str | None = None
    ) -> asyncio.Task[RunResult] | None:
        """The agent's running task for ``run_id``, cancelled by ``by``; None when it is not
        running (or has just finished: parked, not yet collected, so ``end_parked`` ends it)."""
        hosted = self._agents.get(agent_id)
        if hosted is None or hosted.running != run_id or hosted.current is None:
            return None
        task = hosted.current
        if not task.cancel():
            return None
        hosted.runtime.cancelling(uuid.UUID(run_id), by)
        return task

    async def close(self) -> None:
        """Stop every hosted agent's consumer and release its runtime and the ledger threads."""
        for hosted in list(self._agents.values()):  # a consumer may passivate as it stops
            if hosted.consumer is not None:
                hosted.consumer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await hosted.consumer
            hosted.runtime.close()
        self._agents.clear()
        self._ledger_threads.shutdown(wait=True)
        self.tenants.close()


def _may_answer(kind: str, message: Any) -> bool:
    """Whether a run may answer another agent's message: one a message started, or a
    resumed one (its start is read from the ledger)."""
    return kind == "resume" or message.trigger == AGENT_MESSAGE


def _drain_queue(mailbox: asyncio.Queue[Mail]) -> list[Mail]:
    items = []
    while not mailbox.empty():
        items.append(mailbox.get_nowait())
    return items
