"""The domain events: immutable, typed facts (msgspec Structs) that make up an agent's ledger.

Every event belongs to one stream: the ``Agent`` stream of its agent, the ``Run`` stream of one
run, the ``Message`` stream of one outbound message (what its delivery came to), the ``Eval``
stream of one evaluation of a candidate model over recorded runs, the one ``anchor`` stream
of the ledger's chain-head anchors, or the one ``principal`` stream of who may use the server.
The event type name is its stored topic (plus ``@N`` from class version 2 on), so renaming a
module never orphans a stored event; renaming a class needs an alias in ``EVENT_ALIASES``.

Evolving an event: bump ``class_version`` and add a static ``upcast_vN_vN+1(state: dict)`` that
rewrites the stored dict of version N into version N+1 (see ``events.codec``).
A field added with a default that means "not used" needs no bump (old records read
with the default; see docs/ledger-lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, Literal, Self
from uuid import UUID

import msgspec

from events.keys import DataKey
from events.streams import agent_stream_id

EVENT_TYPES: dict[str, type[LedgerEvent]] = {}
"""Stored topic name -> event class, filled as event classes are defined."""

EVENT_ALIASES: dict[str, str] = {}
"""Old topic name -> current class name, for classes that were renamed."""

Stream = Literal["agent", "run", "message", "eval", "anchor", "principal"]
ApprovalKind = Literal["call", "question"]
JSON = dict[str, Any]
ContentChange = Callable[[DataKey, str, Any], Any]
"""(key, place, value) -> the value sealed under that key, or opened (``events.sealing``);
``place`` names where the value is, unique within the ledger."""


class LedgerEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Header shared by every event; ``originator_id`` is the stream, ``originator_version`` its
    position in that stream (1-based, contiguous)."""

    stream: ClassVar[Stream]
    class_version: ClassVar[int] = 1
    sealed: ClassVar[tuple[str, ...]] = ()
    """Fields that may hold personal data: stored encrypted under ``data_key()``
    (``events.sealing``)."""

    originator_id: UUID
    originator_version: int
    timestamp: datetime

    def data_key(self) -> DataKey | None:
        """The key the ``sealed`` fields are encrypted under (None: the event has none)."""
        return None

    def with_content(self, change: ContentChange) -> Self:
        """The event with ``change`` applied to content nested inside its fields, which
        ``sealed`` cannot name (a snapshot's state); itself when it holds none."""
        return self

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            EVENT_TYPES[cls.__name__] = cls


class _AgentEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "agent"


class _RunEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "run"

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.originator_id)


class _AgentKeyed(_AgentEvent, frozen=True, kw_only=True):
    """An agent-stream event sealed under the agent's key."""

    def data_key(self) -> DataKey | None:
        return DataKey("agent", self.originator_id, self.originator_id)


class _MessageEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "message"


class _EvalEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "eval"


class _AnchorEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "anchor"


class _PrincipalEvent(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "principal"


# --- Agent stream -------------------------------------------------------------------------------


class AgentRegistered(_AgentEvent, frozen=True, kw_only=True):
    agent_id: str
    app_dir: str = ""
    parent_agent_id: str = ""
    """The agent that spawned this one as a sub-agent ("" for a top-level agent)."""
    depth: int = 0
    """0 for a top-level agent, its parent's depth + 1 for a sub-agent."""
    withheld_tools: list[str] = []
    """Tools a sub-agent does not get, whatever its app says."""


class AppAttached(_AgentEvent, frozen=True, kw_only=True):
    """The agent's app directory is now ``app_dir`` (it was served from another path)."""

    app_dir: str
    previous: str = ""


class IdentityLoaded(_AgentEvent, frozen=True, kw_only=True):
    soul_sha256: str
    identity_sha256: str
    skills: dict[str, str] = {}
    """Skill name -> sha256 of its SKILL.md."""
    config_sha256: str = ""
    """sha256 of the app's owlclaw.toml ("" without one)."""
    code_sha256: str = ""
    """sha256 of the app's handlers.py ("" without one)."""
    governance: JSON = {}
    """The app's ``[governance]`` table as loaded (allow/deny/ask, rate limits, daily budget),
    so what governed a decision is read from the ledger; empty in events recorded before it
    was kept (``config_sha256`` still identifies the owlclaw.toml)."""


class RunQueued(_AgentEvent, frozen=True, kw_only=True):
    """The agent accepted a trigger; its run will execute in this order."""

    sealed: ClassVar[tuple[str, ...]] = ("focus", "payload", "context")

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    run_id: UUID
    run_no: int
    trigger: str
    focus: str | None = None
    payload: JSON = {}
    context: JSON = {}
    idle: bool = False
    """A heartbeat with nothing pending when it was queued: the run is skipped, no model call."""
    idempotency_key: str | None = None
    """The client's key for this trigger: a retry with the same key gets this run again."""
    inbound: list[int] = []
    """A heartbeat's: the agent-stream versions of the InboundReceived since the agent's
    previous run (the newest kept); the run shows them to the model and so consumes them."""
    by: str | None = None
    """The principal whose request triggered it (webhook, MCP, A2A); None when no operator
    did (a heartbeat, a timer, a sub-agent spawn), and in events recorded before it was kept."""


OnMissed = Literal["one", "all", "skip"]
"""What a schedule does with the fires the timer service missed (it was down): fire once for
them all, fire each of them (``owlclaw.timers.fires.MAX_CAUGHT_UP`` at most), or none."""
ON_MISSED_OF_MISFIRE: dict[str, OnMissed] = {"coalesce": "one", "catch_up": "all", "skip": "skip"}
"""The policy's names before ScheduleRequested v2 (its ``misfire`` field) and what they became."""


def schedule_key(agent_stream: UUID, owner_run_id: UUID | None) -> DataKey:
    """The key a schedule's focus is sealed under: its requesting run's, else the agent's."""
    if owner_run_id is None:
        return DataKey("agent", agent_stream, agent_stream)
    return DataKey("run", owner_run_id, agent_stream)


class ScheduleRequested(_AgentEvent, frozen=True, kw_only=True):
    """A schedule (its focus becomes the focus of each run it fires), sealed under the key of
    the run that requested it, which holds the same words in its tool call: erasing that run
    erases them everywhere it put them. A schedule no run requested: the agent's key."""

    sealed: ClassVar[tuple[str, ...]] = ("focus",)

    def data_key(self) -> DataKey | None:
        return schedule_key(self.originator_id, self.owner_run_id)

    schedule_id: str
    kind: Literal["once", "cron"]
    focus: str
    owner_run_id: UUID | None = None
    delay_seconds: int | None = None
    cron: str | None = None
    fire_at: datetime | None = None
    agent_id: str = ""
    on_missed: OnMissed = "one"
    """What to do with fires the timer service missed (it was down) that are still inside the
    catch-up window: fire the latest of them only, fire each one, or none (each miss is
    recorded). Version 1 called it ``misfire`` (coalesce, catch_up, skip)."""
    catch_up_window_s: int = 3600

    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["on_missed"] = ON_MISSED_OF_MISFIRE[state.pop("misfire", "coalesce")]


class ScheduleRegistered(_AgentEvent, frozen=True, kw_only=True):
    schedule_id: str
    backend: str
    backend_id: str


class ScheduleCancelled(_AgentEvent, frozen=True, kw_only=True):
    schedule_id: str
    reason: str = ""
    by: str = ""
    """Who cancelled it: "agent" (its cancel_schedule tool) or an operator ("console:alice");
    empty in events recorded before it was kept."""


class TimerFired(_AgentEvent, frozen=True, kw_only=True):
    schedule_id: str
    fire_time: datetime
    run_id: UUID | None = None


class TimerMissed(_AgentEvent, frozen=True, kw_only=True):
    """Fires that did not happen, by the schedule's ``on_missed`` policy or its catch-up window:
    ``occurrences`` of them, from ``first_fire_time`` to ``fire_time`` (one record for a run of
    misses with the same reason; events recorded before these fields stand for one)."""

    schedule_id: str
    fire_time: datetime
    reason: str
    occurrences: int = 1
    first_fire_time: datetime | None = None
    """The earliest of the occurrences; None when it is ``fire_time`` (a single one)."""


class TimerDeduplicated(_AgentEvent, frozen=True, kw_only=True):
    """A delivery that must not start a run: already fired, or the schedule was cancelled."""

    schedule_id: str
    fire_time: datetime
    reason: str


class SubAgentSpawned(_AgentEvent, frozen=True, kw_only=True):
    """A run of this agent started a sub-agent's run (spawn_agent)."""

    sealed: ClassVar[tuple[str, ...]] = ("task",)

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    spawn_id: str
    """The spawning call's idempotency key: one child run per call, across resumes."""
    run_id: UUID
    call_id: str
    child_agent_id: str
    child_run_id: UUID
    profile: str | None = None
    task: str
    wait: bool


class SubAgentFinished(_AgentEvent, frozen=True, kw_only=True):
    """A sub-agent's run ended: its outcome, as the spawning run gets it. It names the spawn
    whole, as it may be recorded before the SubAgentSpawned it answers is committed."""

    sealed: ClassVar[tuple[str, ...]] = ("answer",)

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    spawn_id: str
    run_id: UUID
    call_id: str
    child_agent_id: str
    child_run_id: UUID
    wait: bool
    status: str
    answer: str = ""
    tokens: int = 0
    cost_usd: float = 0.0


class AgentMessageSent(_AgentEvent, frozen=True, kw_only=True):
    """A run of this agent sent a message to another agent (send_to_agent), delivered through
    that agent's writer. ``request_hash`` is the ledger row hash of the call's ToolCallRequested
    (committed before the tool acted), which the message carried: ``owlclaw verify`` checks the
    link, ``owlclaw ledger --conversation`` follows it."""

    sealed: ClassVar[tuple[str, ...]] = ("text",)

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    message_id: str
    run_id: UUID
    call_id: str
    to_agent_id: str
    text: str
    expect_reply: bool
    hops: int
    """How many messages led to this one, itself included (loops between agents are bounded)."""
    request_version: int
    request_hash: str
    reply_by: datetime | None = None
    """When an awaited reply counts as never coming (None: no reply expected)."""
    to_run_id: UUID | None = None
    """The target's run the message started (None: it waits for the target's heartbeat)."""


class AgentReplyReceived(_AgentEvent, frozen=True, kw_only=True):
    """The answer to a message of this agent that expected one: the end of the target's run it
    started (``status`` is that run's), or ``no_reply`` once its deadline passed. It names its
    message whole, as it may be recorded before the AgentMessageSent it answers is committed."""

    sealed: ClassVar[tuple[str, ...]] = ("reply",)

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    message_id: str
    run_id: UUID
    call_id: str
    from_agent_id: str
    status: str
    reply: str = ""
    from_run_id: UUID | None = None
    reply_version: int = 0
    """The version of the target's run end event, and its row hash: the reply's link."""
    reply_hash: str = ""


class InboundReceived(_AgentKeyed, frozen=True, kw_only=True):
    """Something arrived for the agent (a webhook, a message); the next heartbeat acts on it."""

    sealed: ClassVar[tuple[str, ...]] = ("payload",)
    source: str
    payload: JSON = {}
    by: str | None = None
    """The principal who posted it; None in events recorded before it was kept."""


class AgentWarning(_AgentEvent, frozen=True, kw_only=True):
    """Something was skipped or degraded without stopping the agent (e.g. an invalid skill)."""

    source: str
    message: str


class ToolsChanged(_AgentEvent, frozen=True, kw_only=True):
    """The operator enabled or disabled tools of the agent (``owlclaw tools --enable/--disable``):
    from the agent's next run on, a disabled tool is hidden from the model and a call to it is
    refused, without editing the app."""

    enabled: list[str] = []
    disabled: list[str] = []
    by: str = ""
    """Who switched them: the principal (``server-token`` for the server's token), or
    ``local:<user>`` for the CLI writing the ledger directly; empty in events recorded before
    it was kept."""


class AppLoadFailed(_AgentEvent, frozen=True, kw_only=True):
    """The agent's app does not load (handlers.py raised or hung at import, a file is missing
    or invalid) and no earlier version is loaded: its runs fail until the app loads again."""

    app_dir: str
    error: str
    """What failed, naming the file."""
    details: str = ""
    """The end of the traceback: where the import raised, or where it was when time was up."""


class MemoryAdded(_AgentEvent, frozen=True, kw_only=True):
    """A memory a run remembered (its MemoryRemembered, in the same commit, holds the content)
    joins the agent's active memories: what the per-agent memory limit counts."""

    memory_id: UUID
    run_id: UUID


class MemoryArchived(_AgentEvent, frozen=True, kw_only=True, omit_defaults=True):
    """Active memories left recall and MEMORY.md for MEMORY.archive.md: the agent's oldest, to
    make room under the memory limit (recorded in the commit of the memory that reached it), or
    those not recalled for ``[memory] archive_after_days`` (``projections.memory_ages``)."""

    memory_ids: list[UUID]
    reason: str
    age_days: int = 0
    """The age that archived them: not recalled for this many days (0: at the memory limit;
    omitted then, so a limit's archive is stored as before)."""


class MemoryExpired(_AgentEvent, frozen=True, kw_only=True):
    """Archived memories deleted by the age policy (``[memory] delete_after_days``): they
    leave the memory view and MEMORY.archive.md, and their content is erased as ``owlclaw
    erase`` does it: recorded first, then ``keys`` (their data keys) destroyed."""

    memory_ids: list[UUID]
    reason: str
    age_days: int
    """The age that deleted them: archived for this many days."""
    keys: list[UUID]


class MemoryForgotten(_AgentEvent, frozen=True, kw_only=True):
    """A run forgot one of the agent's active memories: it leaves recall and MEMORY.md; the
    ledger keeps its MemoryRemembered."""

    memory_id: UUID
    run_id: UUID


ErasureKind = Literal["memory", "run", "agent"]


class DataErased(_AgentEvent, frozen=True, kw_only=True):
    """``owlclaw erase``: an operator destroyed the data keys of one memory, one run or the
    whole agent, so the content sealed under them is unreadable everywhere; the events stay
    (the chain is over their ciphertext) and read as ``[erased]``.

    Recorded before the keys are destroyed. ``memory_ids``: the memories whose content went
    (the memory view drops them, MEMORY.md is rewritten without them)."""

    kind: ErasureKind
    target: str
    """The memory id, run id or agent id named."""
    keys: list[UUID]
    memory_ids: list[UUID] = []
    reason: str
    by: str


class ApprovalRequested(_AgentEvent, frozen=True, kw_only=True):
    """A run's tool call waits for a person's yes (governance ask / ask_if / default), or, of
    ``kind`` question, for a person's answer (ask_human); the run parks (RunParked) until
    ApprovalGranted, ApprovalDenied or ApprovalExpired."""

    sealed: ClassVar[tuple[str, ...]] = ("arguments",)

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.run_id, self.originator_id)

    approval_id: str
    agent_id: str
    run_id: UUID
    call_id: str
    tool: str
    arguments: JSON
    reason: str
    approvers: list[str]
    """Who may answer; empty: any operator."""
    expires_at: datetime
    digest: str = ""
    """``events.argument_digest`` of ``arguments``: an answer must name it (version 1 had
    none; its approvals are bound to the digest of their arguments as read)."""
    approvals_required: int = 1
    """How many different principals must grant the call before it runs."""
    kind: ApprovalKind = "call"
    """``question``: ask_human's, answered with text (ApprovalGranted ``answer``), never
    denied; its arguments are the question and its options."""

    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state.setdefault("digest", "")
        state.setdefault("approvals_required", 1)


class ApprovalGranted(_AgentKeyed, frozen=True, kw_only=True):
    """One principal's yes. The call runs once ``awaiting`` is 0; before that the run stays
    parked for the grants still missing."""

    sealed: ClassVar[tuple[str, ...]] = ("arguments", "answer")
    approval_id: str
    by: str
    note: str = ""
    arguments: JSON | None = None
    """Arguments the approver edited (validated against the tool's schema), or None."""
    digest: str = ""
    """The digest of the arguments this grant is for: the request's, or the edited ones'
    (version 1 had none)."""
    awaiting: int = 0
    """Grants from other principals still needed after this one."""
    answer: str | None = None
    """A question's answer (one of its options when it has any); None for a call's grant."""
    principal: str | None = None
    """Who authenticated the answer: ``by`` for a principal's token, ``server-token`` for the
    server's (whose caller names ``by``); None for an answer written without a server."""

    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state.setdefault("digest", "")
        state.setdefault("awaiting", 0)


class ApprovalDenied(_AgentEvent, frozen=True, kw_only=True):
    approval_id: str
    by: str
    note: str = ""
    principal: str | None = None
    """As ApprovalGranted's."""


class ApprovalExpired(_AgentEvent, frozen=True, kw_only=True):
    """Nobody answered in time: the call is denied."""

    approval_id: str


class RunSealed(_AgentEvent, frozen=True, kw_only=True):
    """A run ended: its stream's head as that end committed (in the same transaction), so a
    deleted tail, a deleted stream or an event appended after the end is found by comparing.

    Shape, for readers outside OwlClaw: ``run_id`` (the run stream's id), ``run_no``,
    ``version`` (the run stream's last version, its end event) and ``hash`` (that event's row
    hash, lowercase hex, as stored in the ledger's ``hash`` column). A parked run is sealed
    when it finally ends, with the head it has then."""

    run_id: UUID
    run_no: int
    version: int
    hash: str


class ArchivedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run an archive file holds: its stream's head as archived (the shape of RunSealed)."""

    run_id: UUID
    run_no: int
    version: int
    """The run stream's last version: its event count (versions are contiguous from 1)."""
    hash: str
    """That event's row hash, lowercase hex."""


class ArchiveSealed(_AgentEvent, frozen=True, kw_only=True):
    """Ended runs of this agent were moved out of the ledger table into one archive file,
    recorded before their rows are deleted, so an archived run is accounted for, not missing.

    Shape, for readers outside OwlClaw: ``file`` (its name under the archive directory),
    ``sha256`` (of the file's bytes, lowercase hex), ``period`` (``YYYY-MM``, the month the
    runs ended in, UTC), ``runs`` (each run's id, number, last version and row hash), ``root``
    (the Merkle root over ``runs``, ``events.archive_seal.merkle_root``), and the log
    positions its rows had (``first_position``, ``last_position``)."""

    file: str
    sha256: str
    period: str
    runs: list[ArchivedRun]
    root: str
    first_position: int
    last_position: int


class BudgetExceeded(_AgentEvent, frozen=True, kw_only=True):
    run_id: UUID | None
    budget: str
    limit: float
    spent: float


# --- Run stream ---------------------------------------------------------------------------------


class RunStarted(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("focus", "payload", "context")

    def data_key(self) -> DataKey | None:
        return DataKey("run", self.originator_id, agent_stream_id(self.agent_id))

    agent_id: str
    run_no: int
    trigger: str
    focus: str | None = None
    payload: JSON = {}
    context: JSON = {}
    inbound: list[int] = []
    """Its RunQueued's ``inbound``: a resumed run shows the model the same events."""


class VisibleToolsResolved(_RunEvent, frozen=True, kw_only=True):
    tools: list[str]
    filtered: dict[str, str] = {}
    """Tool name -> why it is not visible."""


class LLMResponded(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("message",)
    model: str
    message: JSON
    fallback_hops: list[str] = []
    usage: dict[str, int] = {}
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    inputs: JSON = {}
    """The exact inputs of this decision: identity hashes, memories, skills, tools."""


class ToolCallRequested(_RunEvent, frozen=True, kw_only=True, omit_defaults=True):
    sealed: ClassVar[tuple[str, ...]] = ("arguments", "raw_arguments", "repaired_arguments")
    call_id: str
    tool: str
    arguments: JSON
    raw_arguments: str = ""
    """When the model's arguments were almost JSON and repaired (``owlclaw.tools.repair``):
    the text it sent, and the text they were repaired into (``arguments`` is that text parsed
    and validated). Both omitted when empty, so a call sent as JSON is stored as before."""
    repaired_arguments: str = ""
    schema_sha256: str = ""
    """For a tool from an MCP server: the hash of the tool as listed (name, description, input
    schema, annotations), so replay and audit know exactly which tool was called."""
    server_name: str = ""
    """For a tool from an MCP server: the server's name and version as it announced them."""
    server_version: str = ""


class ToolCallDenied(_RunEvent, frozen=True, kw_only=True):
    call_id: str
    tool: str
    reason: str
    error_code: str | None = None
    """The code the model was told when not TOOL_DENIED (RATE_LIMITED, APPROVAL_DENIED,
    APPROVAL_EXPIRED): a resumed run tells it the same."""


class ToolCallRejected(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("arguments_text",)
    call_id: str
    tool: str
    error: str
    arguments_text: str = ""


class ToolCallSucceeded(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("result",)
    call_id: str
    tool: str
    result: Any
    """The JSON-safe result; above the ledger's cap, its JSON text cut with a marker."""
    duration_ms: float = 0.0
    result_bytes: int = 0
    """Size of the whole encoded result."""
    truncated: bool = False
    """The model saw the result cut to the tool's limit."""


class ToolCallFailed(_RunEvent, frozen=True, kw_only=True):
    call_id: str
    tool: str
    error: str
    error_code: str
    retryable: bool = False
    duration_ms: float = 0.0
    traceback: str = ""
    """Where a system error was raised (bounded); empty for errors the tool returned."""


class ToolCallTimedOut(_RunEvent, frozen=True, kw_only=True):
    call_id: str
    tool: str
    timeout_s: float
    duration_ms: float = 0.0


class ToolOutcomeUnknown(_RunEvent, frozen=True, kw_only=True):
    call_id: str
    tool: str
    reason: str


class DecisionLogged(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("reasoning",)
    decision_type: str
    reasoning: str
    call_id: str | None = None
    """The log_decision tool call that recorded it."""


class PlanUpdated(_RunEvent, frozen=True, kw_only=True):
    """The run's whole plan as the update_plan tool set it; it replaces the previous one."""

    sealed: ClassVar[tuple[str, ...]] = ("items",)
    items: Any
    """``[{"text": ..., "status": "pending" | "in_progress" | "done"}, ...]``: plain values,
    because a sealed field opens as JSON (and an erased one as the erased marker)."""
    call_id: str | None = None
    """The update_plan tool call that recorded it."""


class RunWarning(_RunEvent, frozen=True, kw_only=True):
    """The run went on with less than it asked for (e.g. recall from a lagging index)."""

    source: str
    message: str


class MemoryRemembered(_RunEvent, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("content",)

    def data_key(self) -> DataKey | None:
        return DataKey("memory", self.memory_id, agent_stream_id(self.agent_id))

    agent_id: str
    memory_id: UUID
    content: str
    tags: list[str] = []
    embedding_model: str = ""
    """The embedding model of the memory index the run recalled from, which indexes this
    memory; "" in events recorded before it was kept, and by a runtime without recall: the
    deployment's configured model (``memory.embedding_model``) indexed it."""


class MessageSent(_RunEvent, frozen=True, kw_only=True):
    """The run sent a message through one of its app's channels; the outbox delivers it (at
    least once, with ``message_id`` as the idempotency key). It carries how to deliver, so the
    outbox needs no app's configuration: header values are read from the environment variables
    ``headers_env`` names at delivery time, never recorded."""

    sealed: ClassVar[tuple[str, ...]] = ("text",)
    message_id: str
    agent_id: str
    run_id: UUID
    channel: str
    kind: str
    url: str
    text: str
    headers_env: dict[str, str] = {}
    """Header name -> name of the environment variable holding its value."""
    timeout_s: float = 10.0
    attempts: int = 5


class RunParked(_RunEvent, frozen=True, kw_only=True):
    """The run stopped at a call waiting for approval, or for a sub-agent's run to end; no
    process holds it. The answer (the sub-agent's end) resumes it from its recorded steps
    (RunResumed)."""

    approval_id: str = ""
    call_id: str
    spawn_id: str = ""
    """Set when the call waits for the sub-agent it spawned."""
    message_id: str = ""
    """Set when the call waits for another agent's reply (send_to_agent)."""


class SubAgentCharged(_RunEvent, frozen=True, kw_only=True):
    """A sub-agent's tokens and cost, charged to the run that spawned it (and so to its
    agent's daily budget) when its result came back."""

    spawn_id: str
    child_agent_id: str
    tokens: int
    cost_usd: float


class RunInterrupted(_RunEvent, frozen=True, kw_only=True):
    reason: str


class RunResumed(_RunEvent, frozen=True, kw_only=True):
    from_version: int


class _RunEnded(_RunEvent, frozen=True, kw_only=True):
    iterations: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0


class RunCompleted(_RunEnded, frozen=True, kw_only=True):
    sealed: ClassVar[tuple[str, ...]] = ("answer",)
    answer: str = ""


class RunFailed(_RunEnded, frozen=True, kw_only=True):
    error: str


class RunTimedOut(_RunEnded, frozen=True, kw_only=True):
    timeout_s: float


class RunTerminated(_RunEnded, frozen=True, kw_only=True):
    reason: str
    by: str | None = None
    """The principal who cancelled the run; None when no operator did (the runtime stopped
    it, a limit), and in events recorded before it was kept."""


class RunSkipped(_RunEnded, frozen=True, kw_only=True):
    reason: str


# --- Anchor stream ------------------------------------------------------------------------------


class StreamHead(msgspec.Struct, frozen=True, kw_only=True):
    """One stream's last event: its version and row hash (lowercase hex)."""

    stream: UUID
    version: int
    hash: str


class ChainsAnchored(_AnchorEvent, frozen=True, kw_only=True):
    """``owlclaw anchor``: the head of every stream of the ledger at one moment.

    Shape, for readers outside OwlClaw: ``heads`` is a list of {stream, version, hash} (hash:
    lowercase hex of the row hash of the stream's event at that version), sorted by stream id,
    every stream of the ledger except the anchor stream itself; ``digest`` is the lowercase hex
    sha256 of the lines ``<stream>:<version>:<hash>\\n`` in that order
    (``events.heads.anchor_digest``), one value an operator can quote for the whole list. A later
    stream shorter than its anchored version, or whose event at that version has another hash,
    was altered after the anchor. The stream is ``events.heads.ANCHOR_STREAM_ID``."""

    heads: list[StreamHead]
    digest: str


# --- Message stream -----------------------------------------------------------------------------


class MessageDeliveryFailed(_MessageEvent, frozen=True, kw_only=True):
    """Every attempt to deliver a MessageSent failed; ``owlclaw projections retry outbox`` sends
    it again. Recorded by the outbox on the message's own stream (``message_stream_id``): the
    agent's and run's streams have one writer, the agent's runtime."""

    message_id: str
    agent_id: str
    channel: str
    attempts: int
    error: str


# --- Eval stream --------------------------------------------------------------------------------


class EvalStarted(_EvalEvent, frozen=True, kw_only=True):
    """``owlclaw eval`` re-asks ``model`` at the decision points of the agent's selected runs
    (``eval_stream_id(eval_id)``); its writer is that one command."""

    eval_id: str
    agent_id: str
    model: str
    selector: JSON
    """How the runs were chosen (range, trigger, focus text, time window)."""
    run_nos: list[int]
    app_dir: str = ""


class EvalRunCompared(_EvalEvent, frozen=True, kw_only=True):
    """One run re-decided: how the candidate's decisions compare with the recorded ones."""

    run_no: int
    outcome: Literal["identical", "different", "new_tool", "refused"]
    decisions: int
    """Decision points re-asked."""
    same: int
    """Of them, decided as recorded."""
    first_divergence: int | None = None
    """The step (1-based) of the first decision that differs."""
    recorded: str = ""
    """The recorded decision at the first divergence."""
    candidate: str = ""
    """The candidate's decision there (or its error)."""
    recorded_tokens: int = 0
    candidate_tokens: int = 0
    recorded_cost_usd: float = 0.0
    candidate_cost_usd: float = 0.0


class EvalFinished(_EvalEvent, frozen=True, kw_only=True):
    runs: int
    counts: dict[str, int]
    """Runs by outcome: identical, different, new_tool, refused."""
    divergent_fraction: float
    recorded_tokens: int = 0
    candidate_tokens: int = 0
    recorded_cost_usd: float = 0.0
    candidate_cost_usd: float = 0.0
    duration_ms: float = 0.0


# --- Principal stream ---------------------------------------------------------------------------


class PrincipalAdded(_PrincipalEvent, frozen=True, kw_only=True):
    """``owlclaw principals add``: a named principal, its grants (``role`` or ``role:pattern``,
    ``owlclaw.access.roles``) and the sha256 (hex) of its token. The stream is
    ``events.streams.PRINCIPALS_STREAM_ID``; the ``principals`` table is its current state.

    The digest is no secret: the token is 256 random bits, so no one finds a token from it."""

    name: str
    grants: list[str]
    token_sha256: str
    by: str


class PrincipalTokenRotated(_PrincipalEvent, frozen=True, kw_only=True):
    """The principal's token was replaced: the old one stops working."""

    name: str
    token_sha256: str
    by: str


class PrincipalRevoked(_PrincipalEvent, frozen=True, kw_only=True):
    """The principal's token stops working for good; its name stays taken (the ledger's ``by``
    fields still name it)."""

    name: str
    by: str


RunEnded = _RunEnded
"""The base of the end events: a run records exactly one of them."""

TERMINAL_RUN_EVENTS: tuple[type[LedgerEvent], ...] = (
    RunCompleted,
    RunFailed,
    RunTimedOut,
    RunTerminated,
    RunSkipped,
)

CALL_SETTLING_EVENTS: tuple[type[LedgerEvent], ...] = (
    ToolCallSucceeded,
    ToolCallFailed,
    ToolCallTimedOut,
    ToolCallDenied,
    ToolCallRejected,
    ToolOutcomeUnknown,
)
"""The events that end a tool call: each says what the model was told about it."""


def event_fields(event: LedgerEvent) -> JSON:
    """The event's own fields (without the stream header), as JSON-ready data."""
    data = msgspec.to_builtins(event)
    for key in ("originator_id", "originator_version", "timestamp"):
        data.pop(key, None)
    return data  # type: ignore[no-any-return]
