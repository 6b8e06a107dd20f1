"""Where agents live: one interface, two implementations.

Everything that reaches an agent (a webhook trigger, a timer fire, a heartbeat, an inbound
event) is a message to its one writer through ``Agents``: in this process
(``actors.host.AgentHost``: a FIFO mailbox per agent) or on a Ray cluster
(``actors.directory.AgentDirectory``: named actors hosting those mailboxes). Both accept a run
once its RunQueued is committed and return the same typed results;
``tests/integration/test_agents_conformance.py`` holds them to the same contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import msgspec

from events import catalog as ev
from owlclaw.runtime.approvals import ApprovalAnswer, Decision
from owlclaw.runtime.loop import RunResult
from owlclaw.timers.fires import FireOutcome, TimerFire
from owlclaw.tools.subagents import SubAgentReport
from owlclaw.tools.switches import ToolsChange


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


class Agents(Protocol):
    async def submit(
        self,
        agent_id: str,
        trigger: str,
        *,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Accept a run of a registered agent; its run id once RunQueued is committed (the run
        is durable from then on). A key the agent already accepted returns that run's id."""
        ...

    async def result(self, agent_id: str, run_id: str) -> RunResult:
        """Wait for an accepted run to end (answered from the ledger if it already has)."""
        ...

    def events(self, run_id: str, *, timeout_s: float = 600.0) -> AsyncIterator[ev.LedgerEvent]:
        """The run's events as they are committed, until its end event."""
        ...

    async def fire(self, fire: TimerFire) -> FireOutcome:
        """Deliver a timer fire; returns once the agent's verdict is committed."""
        ...

    async def receive(self, agent_id: str, source: str, payload: dict[str, Any]) -> int:
        """Record an inbound event (InboundReceived) for the agent's next heartbeat; its log
        position once committed."""
        ...

    async def change_tools(
        self, agent_id: str, enable: list[str], disable: list[str]
    ) -> ToolsChange:
        """Enable and disable the agent's tools (ToolsChanged) through its writer; UnknownTools
        (a ValueError) for a name its app does not have, and nothing is recorded."""
        ...

    async def cancel_schedule(
        self, agent_id: str, schedule_id: str, by: str, reason: str = ""
    ) -> int:
        """Cancel an active schedule (ScheduleCancelled naming ``by``) through the agent's
        writer; UnknownSchedule (a ValueError) and nothing recorded when it is not active. The
        log position of the cancel."""
        ...

    async def subagent_finished(self, agent_id: str, report: SubAgentReport) -> None:
        """Record that a sub-agent of ``agent_id`` ended (SubAgentFinished, through its
        writer); the run that waits for it resumes."""
        ...

    async def answer_approval(self, agent_id: str, decision: Decision) -> ApprovalAnswer:
        """Record a person's answer through the agent's writer and resume the parked run;
        ApprovalClosed / ToolArgumentsInvalid (ValueErrors) and nothing recorded otherwise."""
        ...

    async def expire_approvals(self, agent_id: str) -> int:
        """Record ApprovalExpired for the agent's overdue approvals through its writer; their
        parked runs resume, the calls denied. How many expired."""
        ...

    async def status(self, agent_id: str | None = None) -> HostStatus: ...

    async def cancel(self, agent_id: str, run_id: str) -> bool:
        """Cancel the agent's running run (it ends with RunTerminated "cancelled")."""
        ...

    async def activate(self, agent_id: str) -> float:
        """Make the agent ready (rebuilt from the ledger if it was not); milliseconds taken."""
        ...

    async def close(self) -> None:
        """Stop hosting: a run in flight ends as cancelled (RunTerminated); runs accepted but not
        started are durable and run on the agent's next activation."""
        ...
