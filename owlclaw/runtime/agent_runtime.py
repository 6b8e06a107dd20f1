"""One agent's runtime: its setup, writer's inbox, commit pipeline and run driver, composed,
and the lifecycle of its runs (start, resume, cancel). Runs of one runtime are serialized by
the caller (a host's queue).

Ledger calls are synchronous; they run on one worker thread per runtime (or in order on a
host's shared pool) so the agent's appends keep their order and the event loop never blocks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID

from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw import tracing
from owlclaw.agents import Agents
from owlclaw.app import AgentApp
from owlclaw.config import RuntimeConfig
from owlclaw.heartbeat.wake import failures
from owlclaw.mcp.pool import McpPool
from owlclaw.messages import RunResult
from owlclaw.runtime.agent_setup import AgentSetup
from owlclaw.runtime.briefing import Briefing
from owlclaw.runtime.commits import Collected, Commits
from owlclaw.runtime.driver import RunDriver
from owlclaw.runtime.inbox import Inbox
from owlclaw.runtime.models import Completer, LiteLLM
from owlclaw.runtime.progress import RunProgress
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.runtime.serial import LedgerCalls
from owlclaw.runtime.steps import RecordedOutcomes, RecordedSteps
from owlclaw.tenants import TenantBudget
from owlclaw.tools.agent_mail import AgentMail
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from owlclaw.tools.live import LiveExecution
from owlclaw.tools.subagents import SubAgents
from owlclaw.tools.threads import HandlerThreads
from projections.recall import MemoryStore


class AgentRuntime:
    """Runs one agent: ``inbox`` takes the messages that change it, ``setup`` holds its app
    state, ``briefing`` what its model is shown; the methods here start and end its runs.

    With ``replay`` set it re-executes that recorded run for audit (``run``): the driver is
    primed with all its recorded steps, tools settle with their recorded outcomes, the app
    directory, memory and budgets are not read, and nothing is committed (the events it would
    have written are in ``produced``).
    """

    def __init__(
        self,
        ledger: Ledger,
        agent_id: str,
        *,
        models: list[str],
        app: AgentApp | None = None,
        registry: Registry | None = None,
        memory: MemoryStore | None = None,
        limits: RuntimeConfig | None = None,
        governance: Governance | None = None,
        replay: RecordedRun | None = None,
        app_dir: Path | None = None,
        workspaces: Path | None = None,
        agents: Agents | None = None,
        llm: Completer | None = None,
        ledger_threads: Executor | None = None,
        mcp: McpPool | None = None,
        tenant_budget: TenantBudget | None = None,
    ):
        """``ledger_threads``: a pool shared by the agents of a host, on which this agent's
        ledger calls run in order (default: a thread of its own). ``mcp``: the host's MCP
        connections (None: the app's MCP servers are not used). ``tenant_budget``: the daily
        cost budget of the agent's tenant (None: it has none)."""
        if not models:
            raise ValueError("at least one model is needed")
        self.ledger = ledger
        self.agent_id = agent_id
        self.setup = AgentSetup(
            ledger,
            agent_id,
            models=models,
            app=app,
            app_dir=app_dir,
            registry=registry,
            limits=limits or RuntimeConfig(),
            governance=governance,
            workspaces=workspaces,
            observes_world=replay is None,
            mcp=mcp,
            tenant_budget=tenant_budget,
        )
        self._io = LedgerCalls(
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ledger-{agent_id}")
            if ledger_threads is None
            else ledger_threads,
            owned=ledger_threads is None,
        )
        self._replay = replay
        self._collected = Collected()
        sink = Commits(ledger, self.setup.writer, self._io) if replay is None else self._collected
        subagents = SubAgents(ledger, agents) if agents is not None else None
        self.briefing = Briefing(self.setup, memory)
        self.inbox = Inbox(self.setup, sink, self._io, subagents)
        self._sink = sink
        self._cancels: dict[UUID, str | None] = {}
        """Run id -> who is cancelling it (None: nobody named), told before its task is
        cancelled; a run cancelled without an entry here is stopped with its runtime."""
        self._driver = RunDriver(
            ledger,
            self.setup,
            self.briefing,
            sink,
            self._io,
            llm=llm or LiteLLM(),
            execution=RecordedOutcomes(replay) if replay is not None else LiveExecution(),
            memory=memory,
            subagents=subagents,
            threads=HandlerThreads(name=f"tools-{agent_id}"),
            cancels=self._cancels,
            mail=AgentMail(ledger, agents) if agents is not None else None,
        )
        tracing.enable()

    @property
    def models(self) -> list[str]:
        """The agent's model path (its app's, once loaded, when the app names one)."""
        return self.setup.models

    @models.setter
    def models(self, models: list[str]) -> None:
        self.setup.models = models

    @property
    def parent_agent_id(self) -> str:
        """The agent that spawned this one ("" for a top-level agent), as last loaded."""
        return self.setup.parent_agent_id

    @property
    def produced(self) -> list[ev.LedgerEvent]:
        """What a replay would have committed."""
        return self._collected.produced

    def close(self) -> None:
        self._io.close()

    async def run(
        self,
        trigger: str,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> RunResult:
        """Queue and execute a run at once, for callers that serialize the agent's runs
        themselves; hosts use ``inbox.submit``. RunQueued commits first, as ``submit`` commits
        it, so that the first step carries no agent event and can commit behind the run."""
        started = time.perf_counter()
        agent = await self._io(self.setup.prepare)
        queued = agent.queue_run(trigger, focus, payload, context)
        agent, _ = await self._sink.append(agent)
        steps = RecordedSteps(self._replay)
        state = RunProgress(agent, Run.start(self.agent_id, queued), started, steps)
        return await self._execute_run(state, queued)

    async def run_queued(self, queued: ev.RunQueued) -> RunResult:
        """Execute a run accepted by ``inbox.submit`` or ``inbox.fire``: the agent is prepared
        for it here, once."""
        started = time.perf_counter()
        agent = await self._io(self.setup.prepare)
        state = RunProgress(agent, Run.start(self.agent_id, queued), started)
        return await self._execute_run(state, queued)

    def cancelling(self, run_id: UUID, by: str | None) -> None:
        """``by`` is cancelling the run in flight: its RunTerminated names them. Told as its
        task is cancelled, before the task sees it, so a cancel told here (even by nobody
        named) ends the run where the runtime stopping would leave it parked."""
        self._cancels[run_id] = by

    async def end_cancelled(self, queued: ev.RunQueued) -> None:
        """A run cancelled before it recorded anything still ends once: RunStarted, then
        RunTerminated ("cancelled"). One that recorded steps ended itself when cancelled."""
        by = self._cancels.pop(queued.run_id, None)
        if await self._io(self.ledger.stream, queued.run_id):
            return
        agent = await self._io(self.ledger.load_agent, self.agent_id)
        state = RunProgress(agent, Run.start(self.agent_id, queued), time.perf_counter())
        state.run.end(ev.RunTerminated, reason="cancelled", by=by, **state.totals())
        await self._sink.commit(state)

    async def end_parked(self, run_id: UUID, by: str | None = None) -> bool:
        """End a parked run (cancelled by ``by``: RunTerminated); False when it is not parked."""
        agent = await self._io(self.setup.head)
        run = await self._io(self.ledger.load_run, run_id)
        if run.state.status != "parked":
            return False
        state = RunProgress(agent, run, time.perf_counter())
        run.end(ev.RunTerminated, reason="cancelled", by=by, **state.totals())
        await self._sink.commit(state)
        return True

    async def resume(self, run_id: UUID) -> RunResult:
        """Finish a run whose process stopped mid-run, or that was parked for an approval now
        answered: a live run primed with its recorded steps. Its recorded model responses are
        served again without calling a model, tools whose outcome is recorded are not
        repeated, a call without a recorded outcome is recorded as ToolOutcomeUnknown (and
        re-executed only if the tool is idempotent); after the recorded steps the run goes on
        with the model (a parked call goes through the pipeline again, now answered). Each
        resumed segment has the whole run timeout."""
        started = time.perf_counter()
        agent = await self._io(self.setup.prepare)
        run = await self._io(self.ledger.load_run, run_id)
        if run.state.ended:  # resumed twice (a report and a reconciliation): nothing left
            return RunResult.of(run)
        recorded = RecordedRun(run_id, await self._io(self.ledger.stream, run_id))
        state = RunProgress(agent, run, started, RecordedSteps(recorded))
        if run.state.status != "parked":
            run.record(ev.RunInterrupted, reason="the process running it stopped")
        run.record(ev.RunResumed, from_version=run.version - 1)
        start = recorded.started
        return await self._to_end(state, start.trigger, start.focus, start.payload, start.context)

    async def _execute_run(self, state: RunProgress, queued: ev.RunQueued) -> RunResult:
        run = state.run
        if queued.idle:  # heartbeat with nothing new: no LLM call, no cost
            failed = failures(queued.payload)  # a source that could not say is never silent
            reason = "heartbeat: no pending events" + (f"; {failed}" if failed else "")
            run.end(ev.RunSkipped, reason=reason, **state.totals())
            await self._sink.commit(state)
            return RunResult.of(run)
        if self.setup.app_error is not None:  # recorded, and the agent goes on serving
            run.end(ev.RunFailed, error=self.setup.app_error, **state.totals())
            await self._sink.commit(state)
            return RunResult.of(run)
        return await self._to_end(
            state, queued.trigger, queued.focus, queued.payload, queued.context
        )

    async def _to_end(
        self,
        state: RunProgress,
        trigger: str,
        focus: str | None,
        payload: Mapping[str, Any],
        context: Mapping[str, Any],
    ) -> RunResult:
        """Drive the run to its end inside its trace (continuing its caller's, when it was
        started with a traceparent), and count it among the agent's runs."""
        traceparent = context.get(tracing.TRACEPARENT)
        with tracing.run_trace(
            state.run.id, self.agent_id, trigger, focus, payload, traceparent
        ) as traced:
            await self._driver.run_to_end(state, trigger, focus, dict(payload))
            tracing.run_ended(traced, state.run.state.status, state.events)
        self.setup.ran(state)
        return RunResult.of(state.run)
