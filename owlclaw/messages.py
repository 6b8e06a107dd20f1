"""Messages to an agent: one typed struct per operation, each declaring its reply type.

Everything that reaches an agent — a webhook trigger, a timer fire, an inbound event, an
operator's switch, an approval answer, a sub-agent's report — is one of these, handed to its
one writer through ``Agents.ask`` (``owlclaw.agents``). The webhook, the CLI, the console, the
timers and the sub-agents build a message; hosting forwards it whole (the Ray directory and
actor never restate its fields); the host's handler for its class (``actors.host``) gives it to
the method of the same name of the agent's inbox (``runtime.inbox.Inbox``). A new message is a
struct here, its handler in ``AgentHost`` and its test.

This module sits at the bottom of the runtime core: it imports only ``events``, msgspec and the
standard library, so everything above may use it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from uuid import UUID

import msgspec

from events.agent_state import FireVerdict

if TYPE_CHECKING:
    from events.agent import Agent
    from events.run import Run

R = TypeVar("R")

# --- replies ---------------------------------------------------------------------------------


NOT_ENDED = frozenset({"pending", "running", "parked", "interrupted"})
"""The statuses (``events.run``) of a run that has not ended."""


class RunResult(msgspec.Struct, frozen=True):
    """How a run ended, as its Run stream records it (so a result read back from the ledger
    after a restart is the same as the one its process returned)."""

    run_id: str
    status: str
    iterations: int
    tool_calls: int
    tools_called: list[str]
    duration_ms: float
    tokens: int
    cost_usd: float

    @property
    def ended(self) -> bool:
        """The run's end is in the ledger (it did not park or stand down)."""
        return self.status not in NOT_ENDED

    @classmethod
    def of(cls, run: Run) -> RunResult:
        state = run.state
        return cls(
            run_id=str(run.id),
            status=state.status,
            iterations=state.llm_calls,
            tool_calls=state.tool_calls,
            tools_called=list(state.tools_called),
            duration_ms=state.duration_ms,
            tokens=state.tokens,
            cost_usd=state.cost_usd,
        )


class FireOutcome(msgspec.Struct, frozen=True):
    """What the agent made of one delivery; returned once the verdict is committed (the fired
    run, if any, then executes in the agent's mailbox)."""

    kind: FireVerdict
    reason: str = ""
    run_id: str | None = None


class ToolsChange(msgspec.Struct, frozen=True):
    """What an enable/disable left: the agent's disabled tools, and where the ToolsChanged was
    recorded (None: nothing changed, nothing recorded)."""

    agent_id: str
    disabled: list[str]
    position: int | None = None


class ApprovalAnswer(msgspec.Struct, frozen=True):
    """An answer as recorded; ``run_id`` is the parked run it resumes once ``status`` is no
    longer pending (a grant short of the approvers required leaves it parked)."""

    approval_id: str
    agent_id: str
    run_id: str
    status: str
    position: int
    granted_by: list[str] = []
    approvals_required: int = 1

    @classmethod
    def of(cls, agent: Agent, approval_id: str, run_id: UUID, position: int) -> ApprovalAnswer:
        approval = agent.state.approvals[approval_id]
        return cls(
            approval_id,
            agent.agent_id,
            str(run_id),
            approval.status,
            position,
            list(approval.granted_by),
            approval.approvals_required,
        )


class Decision(msgspec.Struct, frozen=True):
    """A person's answer to one approval: yes (optionally with edited arguments) or no, for
    the arguments of ``digest`` (the approval's, as shown to them; anything else is refused);
    to a question (ask_human), a yes carrying the ``answer``."""

    approval_id: str
    approve: bool
    by: str
    note: str = ""
    arguments: dict[str, Any] | None = None
    digest: str = ""
    principal: str | None = None
    """Who authenticated the answer (the server sets it; None: written to the ledger directly
    by the CLI, no server). Differs from ``by`` only for the server token, whose caller names
    the person answering."""
    answer: str | None = None
    """A question's answer; None for a call."""


# --- messages --------------------------------------------------------------------------------


class Message(msgspec.Struct, Generic[R], frozen=True, kw_only=True):
    """A message to one agent; ``R`` is its reply (``Agents.ask`` returns it, typed)."""

    agent_id: str


class Submit(Message[str], frozen=True, kw_only=True):
    """Accept a run of a registered agent; its run id once RunQueued is committed (the run is
    durable from then on). A key the agent already accepted returns that run's id."""

    trigger: str
    focus: str | None = None
    payload: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    idempotency_key: str | None = None
    traceparent: str | None = None
    """The caller's W3C traceparent: the run's trace continues the caller's (it is kept in the
    run's context, so that a resumption continues it too)."""
    by: str | None = None
    """The authenticated principal who triggered the run (RunQueued ``by``); None when no
    operator did (a heartbeat, a sub-agent spawn, the demo)."""


class SubmitAndWait(Message[RunResult], frozen=True, kw_only=True):
    """Accept a run and wait for its end, in one message (to follow a run through its actor's
    restart: ``Submit``, then ``Result``)."""

    trigger: str
    focus: str | None = None
    payload: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    by: str | None = None
    """As ``Submit.by``."""


class Result(Message[RunResult], frozen=True, kw_only=True):
    """Wait for an accepted run to end (answered from the ledger if it already has)."""

    run_id: str


class Fire(Message[FireOutcome], frozen=True, kw_only=True):
    """One delivery of a schedule's fire; replied once the agent's verdict is committed. Its
    key (schedule id, fire time) makes a second delivery of the same fire a duplicate."""

    schedule_id: str
    fire_time: datetime
    missed: str | None = None
    """Set when the on_missed policy decided this fire is recorded as missed, with the reason."""
    occurrences: int = 1
    """How many missed fires this delivery records (from ``first_fire_time`` to ``fire_time``)."""
    first_fire_time: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.schedule_id}@{self.fire_time.isoformat()}"


class Receive(Message[int], frozen=True, kw_only=True):
    """Record an inbound event (InboundReceived) for the agent's next heartbeat; its log
    position once committed."""

    source: str
    payload: dict[str, Any]
    by: str | None = None
    """The authenticated principal who posted it (InboundReceived ``by``)."""


class ChangeTools(Message[ToolsChange], frozen=True, kw_only=True):
    """Enable and disable the agent's tools (ToolsChanged naming ``by``); UnknownTools (a
    ValueError) for a name its app does not have, and nothing is recorded."""

    enable: list[str]
    disable: list[str]
    by: str


class CancelSchedule(Message[int], frozen=True, kw_only=True):
    """Cancel an active schedule (ScheduleCancelled naming ``by``); UnknownSchedule (a
    ValueError) and nothing recorded when it is not active. The log position of the cancel."""

    schedule_id: str
    by: str
    reason: str = ""


class AnswerApproval(Message[ApprovalAnswer], frozen=True, kw_only=True):
    """Record a person's answer and resume the parked run; ApprovalClosed /
    ToolArgumentsInvalid (ValueErrors) and nothing recorded otherwise."""

    decision: Decision


class ExpireApprovals(Message[int], frozen=True, kw_only=True):
    """Record ApprovalExpired for the agent's overdue approvals; their parked runs resume, the
    calls denied. How many expired."""


class SubAgentFinished(Message[None], frozen=True, kw_only=True):
    """A sub-agent's run ended: told to its parent (``agent_id``), which records it
    (SubAgentFinished) and resumes the run that waits for it."""

    spawn_id: str
    run_id: UUID
    """The parent's run that spawned it."""
    call_id: str
    child_agent_id: str
    child_run_id: UUID
    wait: bool
    status: str
    answer: str
    tokens: int
    cost_usd: float

    def event_fields(self) -> dict[str, Any]:
        """The SubAgentFinished this report records on the parent's stream."""
        fields = msgspec.structs.asdict(self)
        del fields["agent_id"]
        return fields


class AgentMessage(Message[str | None], frozen=True, kw_only=True):
    """Another agent's message (send_to_agent) to its target (``agent_id``): recorded by the
    target's writer as an InboundReceived from ``agent:<sender>``, with a run (trigger
    ``agent_message``) queued in the same commit, unless no reply is expected and the target
    leaves messages to its heartbeat. The run's id, or None; a message id the target already
    accepted a run for returns that run's id and records nothing."""

    message_id: str
    from_agent_id: str
    from_run_id: UUID
    call_id: str
    """The sender's call: where its reply goes."""
    request_version: int
    request_hash: str
    """The version and row hash of the call's ToolCallRequested on the sender's run: the link
    ``owlclaw verify`` checks."""
    text: str
    expect_reply: bool
    hops: int

    def link(self) -> dict[str, Any]:
        """Everything but the text: what the run it starts keeps in its context."""
        fields = msgspec.structs.asdict(self)
        del fields["agent_id"], fields["text"]
        return msgspec.to_builtins(fields)  # type: ignore[no-any-return]


class AgentReply(Message[None], frozen=True, kw_only=True):
    """The end of a run another agent's message started, told to that agent (``agent_id``)
    when the message expected a reply: recorded (AgentReplyReceived), the waiting run resumed."""

    message_id: str
    run_id: UUID
    """The sender's run that waits."""
    call_id: str
    from_agent_id: str
    status: str
    reply: str
    from_run_id: UUID
    reply_version: int
    reply_hash: str

    def event_fields(self) -> dict[str, Any]:
        """The AgentReplyReceived this reply records on the sender's stream."""
        fields = msgspec.structs.asdict(self)
        del fields["agent_id"]
        return fields


class Cancel(Message[bool], frozen=True, kw_only=True):
    """Cancel the agent's run, running or parked (it ends with RunTerminated "cancelled"), and
    the sub-agent runs it started; False when it was neither."""

    run_id: str
    by: str | None = None
    """The authenticated principal who cancels it (RunTerminated ``by``, the sub-agent runs'
    too); None when no operator did."""


class Activate(Message[float], frozen=True, kw_only=True):
    """Make the agent ready (rebuilt from the ledger if it was not); milliseconds taken."""
