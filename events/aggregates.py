"""The two aggregates of the ledger: one ``Agent`` stream per agent, one ``Run`` stream per run.

Aggregates are plain objects whose state is a msgspec Struct (so a snapshot is that Struct).
They change only by applying events: ``record`` builds the next event of the stream, applies it
and keeps it pending until the ledger commits it. The domain operations (queue a run, judge a
timer fire, start and end a run) are methods here, so every writer derives run numbers, idleness
and verdicts the same way. Each aggregate maps every event class of its stream to its handler,
or lists it as ignored, checked when the class is defined: an event added to the catalog, or
renamed, cannot silently stop changing state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, Self, TypeVar
from uuid import NAMESPACE_URL, UUID, uuid5

import msgspec

from events import catalog as ev
from events.catalog import LedgerEvent, Stream

AGENT_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/agent")
MESSAGE_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/message")
EVAL_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/eval")
ENDED_SCHEDULES_KEPT = 1000
IDEMPOTENCY_KEYS_KEPT = 1000
ANSWERED_APPROVALS_KEPT = 1000
FINISHED_SPAWNS_KEPT = 1000
INBOUND_KEPT = 20
"""Idempotency keys of accepted runs an agent remembers (its last this many keyed runs)."""
PREVIOUS_APP_KEPT = "identity"
"""The AgentWarning source of an app change that does not load: the previous version serves."""
HEARTBEAT = "heartbeat"
"""The trigger of heartbeat runs: one with nothing pending is skipped without a model call."""
FireVerdict = Literal["fire", "duplicate", "missed"]
ENDED_REASONS = {
    "cancelled": "the schedule was cancelled",
    "fired": "this one-off schedule already fired",
    "missed": "this one-off schedule was already recorded as missed",
}


def agent_stream_id(agent_id: str) -> UUID:
    """The Agent stream of ``agent_id`` (deterministic, so any process can find it)."""
    return uuid5(AGENT_NAMESPACE, agent_id)


def run_stream_id(agent_id: str, run_no: int) -> UUID:
    """The Run stream of an agent's ``run_no``-th run, so runs are listed without an index."""
    return uuid5(agent_stream_id(agent_id), f"run/{run_no}")


def message_stream_id(message_id: str) -> UUID:
    """The stream of what became of one outbound message (its delivery failures)."""
    return uuid5(MESSAGE_NAMESPACE, message_id)


def eval_stream_id(eval_id: str) -> UUID:
    """The stream of one ``owlclaw eval`` (its start, each run compared, its summary)."""
    return uuid5(EVAL_NAMESPACE, eval_id)


def approval_id_for(run_id: UUID, call_id: str) -> str:
    """One approval per call: a resumed run finds the answer to the call it parked at."""
    return str(uuid5(run_id, f"approval/{call_id}"))


def now() -> datetime:
    return datetime.now(UTC)


class ActiveSchedule(msgspec.Struct):
    kind: str
    focus: str
    owner_run_id: UUID | None = None
    cron: str | None = None
    fire_at: datetime | None = None
    backend_id: str | None = None
    last_fire_time: datetime | None = None


class Approval(msgspec.Struct):
    """A call waiting for (or given) a person's answer."""

    run_id: UUID
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    approvers: list[str]
    requested_at: datetime
    expires_at: datetime
    status: Literal["pending", "granted", "denied", "expired"] = "pending"
    by: str = ""
    note: str = ""
    answered_at: datetime | None = None
    edited_arguments: dict[str, Any] | None = None


class Spawn(msgspec.Struct):
    """A sub-agent run one of this agent's runs started, and its outcome once it ended."""

    run_id: UUID
    call_id: str
    child_agent_id: str
    child_run_id: UUID
    wait: bool
    status: str = "running"
    answer: str = ""
    tokens: int = 0
    cost_usd: float = 0.0

    @property
    def finished(self) -> bool:
        return self.status != "running"


class ApprovalClosed(ValueError):
    """An answer to an approval that is already answered or expired, or that this person may
    not give (nothing recorded)."""


class UnknownApproval(ApprovalClosed):
    """No such approval."""


class AgentState(msgspec.Struct):
    agent_id: str = ""
    app_dir: str = ""
    registered_at: datetime | None = None
    soul_sha256: str = ""
    identity_sha256: str = ""
    skills: dict[str, str] = {}
    config_sha256: str = ""
    code_sha256: str = ""
    identity_versions: int = 0
    run_count: int = 0
    last_run_id: UUID | None = None
    schedules: dict[str, ActiveSchedule] = {}
    ended_schedules: dict[str, str] = {}
    """Recently ended schedules (id -> "fired" or "cancelled"), to tell late deliveries apart."""
    timers_fired: int = 0
    budget_exceeded: int = 0
    pending_inbound: int = 0
    """Timer fires and inbound events since the agent's last run started."""
    inbound: list[int] = []
    """The inbound events' agent-stream versions (the newest ``INBOUND_KEPT``), for the next
    heartbeat."""
    idempotency_keys: dict[str, UUID] = {}
    """Idempotency key -> run id of recently accepted keyed runs (a retried trigger's run)."""
    disabled_tools: list[str] = []
    """Tools the operator disabled (ToolsChanged), sorted: hidden from the model and refused."""
    app_error: str | None = None
    """Why the app does not load (the last AppLoadFailed), until an identity loads again."""
    app_warning: str | None = None
    """Why the app as changed on disk does not load while its previous version keeps serving
    (the first line of the last AgentWarning from ``identity``), until an identity loads again."""
    approvals: dict[str, Approval] = {}
    """Pending approvals, and the latest answered ones (a parked run reads its answer here)."""
    memories: list[UUID] = []
    """The agent's active memories (MemoryAdded, not archived or forgotten), oldest first: what
    the memory limit counts and, at the limit, which are archived."""
    parent_agent_id: str = ""
    depth: int = 0
    withheld_tools: list[str] = []
    """Tools a sub-agent does not get, whatever its app says."""
    spawns: dict[str, Spawn] = {}
    """Sub-agent runs this agent's runs started: running ones, and the latest finished."""


class UnknownTools(ValueError):
    """An enable/disable named tools the agent does not have (the message names them)."""


class UnknownSchedule(ValueError):
    """A cancel of a schedule the agent does not have active (nothing recorded)."""


class RunState(msgspec.Struct):
    agent_id: str = ""
    run_no: int = 0
    trigger: str = ""
    focus: str | None = None
    inbound: list[int] = []
    """Agent-stream versions of the inbound events this run was given (a heartbeat's)."""
    started_at: datetime | None = None
    status: str = "pending"
    llm_calls: int = 0
    tool_calls: int = 0
    """Calls that passed validation and governance (ToolCallRequested)."""
    calls_made: int = 0
    """Every call the model made, whatever its outcome (requested, denied, rejected): what
    the run's function-call limit counts."""
    tokens: int = 0
    cost_usd: float = 0.0
    open_calls: dict[str, str] = {}
    """call_id -> tool for requested calls with no recorded outcome yet."""
    tools_called: list[str] = []
    ended: bool = False
    duration_ms: float = 0.0


Handler = Callable[[Any, Any], None]
"""An aggregate's method applying one event class to its state: (aggregate, event)."""


def stream_events(stream: Stream) -> frozenset[type[LedgerEvent]]:
    """The event classes of ``events.catalog`` that belong to ``stream``."""
    return frozenset(
        c for c in ev.EVENT_TYPES.values() if c.__module__ == ev.__name__ and c.stream == stream
    )


def check_handlers(
    name: str,
    stream: Stream,
    handlers: Mapping[type[LedgerEvent], Handler],
    ignored: Collection[type[LedgerEvent]],
) -> None:
    """Raise TypeError unless the aggregate ``name`` handles or ignores exactly the catalog's
    events of its ``stream``, each once."""
    expected = stream_events(stream)
    for event in [*handlers, *ignored]:
        if event not in ev.EVENT_TYPES.values() or event.__module__ != ev.__name__:
            raise TypeError(f"{name} maps {event!r}, which is not an event of events.catalog")
        if event not in expected:
            raise TypeError(
                f"{name} maps {event.__name__}, an event of the {event.stream} stream, "
                f"not of the {stream} stream"
            )
    if both := set(handlers) & set(ignored):
        names = ", ".join(sorted(c.__name__ for c in both))
        raise TypeError(f"{name} both handles and ignores {names}")
    if missing := expected - set(handlers) - set(ignored):
        names = ", ".join(sorted(c.__name__ for c in missing))
        raise TypeError(
            f"{name} has no handler for {names} of its {stream} stream: map it in "
            f"{name}.handlers, or list it in {name}.ignored if it changes no state"
        )


class _Aggregate:
    stream: ClassVar[Stream]
    Snapshot: ClassVar[type[Any]]
    handlers: ClassVar[Mapping[type[LedgerEvent], Handler]]
    """Event class -> the method that applies it to the state."""
    ignored: ClassVar[frozenset[type[LedgerEvent]]]
    """Events of the stream that change nothing here (views and audit read them)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_handlers(cls.__name__, cls.stream, cls.handlers, cls.ignored)

    def __init__(self, stream_id: UUID, state: Any, version: int = 0):
        self.id = stream_id
        self.version = version
        self.state = state
        self._pending: list[LedgerEvent] = []

    @classmethod
    def blank(cls, stream_id: UUID) -> Self:
        raise NotImplementedError

    def record(self, event_class: type[LedgerEvent], **fields: Any) -> LedgerEvent:
        """Create the next event of this stream, apply it, and keep it for the next commit."""
        if event_class.stream != self.stream:
            raise TypeError(f"{event_class.__name__} belongs to the {event_class.stream} stream")
        event = event_class(
            originator_id=self.id,
            originator_version=self.version + 1,
            timestamp=now(),
            **fields,
        )
        self.apply(event)
        self._pending.append(event)
        return event

    def apply(self, event: LedgerEvent) -> None:
        handler = self.handlers.get(type(event))
        if handler is not None:
            handler(self, event)
        elif type(event) not in self.ignored:
            raise TypeError(f"{type(self).__name__} does not apply {type(event).__name__}")
        self.version = event.originator_version

    @property
    def pending_events(self) -> list[LedgerEvent]:
        """Recorded events not yet committed."""
        return list(self._pending)

    def collect_events(self) -> list[LedgerEvent]:
        pending, self._pending = self._pending, []
        return pending


A = TypeVar("A", bound=_Aggregate)


class AgentSnapshot(LedgerEvent, frozen=True, kw_only=True):
    stream: ClassVar[Stream] = "agent"
    state: AgentState

    @classmethod
    def take(cls, aggregate: Agent) -> AgentSnapshot:
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=now(),
            state=aggregate.state,
        )

    def restore(self) -> Agent:
        state = msgspec.convert(msgspec.to_builtins(self.state), AgentState)
        return Agent(self.originator_id, state, self.originator_version)


class Agent(_Aggregate):
    stream: ClassVar[Stream] = "agent"
    Snapshot = AgentSnapshot
    state: AgentState

    @classmethod
    def blank(cls, stream_id: UUID) -> Agent:
        return cls(stream_id, AgentState())

    @property
    def agent_id(self) -> str:
        return self.state.agent_id

    def run_ids(self) -> list[UUID]:
        return [run_stream_id(self.agent_id, n) for n in range(1, self.state.run_count + 1)]

    def queue_run(
        self,
        trigger: str,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ev.RunQueued:
        """Accept a run (RunQueued, pending): its number and id are fixed from here, and what it
        needs to start is in the event, so a queued run survives a crash. A heartbeat with nothing
        pending is queued ``idle`` (skipped without a model call)."""
        run_no = self.state.run_count + 1
        queued = self.record(
            ev.RunQueued,
            run_id=run_stream_id(self.agent_id, run_no),
            run_no=run_no,
            trigger=trigger,
            focus=focus,
            payload=payload or {},
            context=context or {},
            idle=trigger == HEARTBEAT and self.state.pending_inbound == 0,
            idempotency_key=idempotency_key,
            inbound=list(self.state.inbound) if trigger == HEARTBEAT else [],
        )
        assert isinstance(queued, ev.RunQueued)
        return queued

    def run_for_key(self, idempotency_key: str) -> UUID | None:
        """The run already accepted with this idempotency key, if the agent remembers one."""
        return self.state.idempotency_keys.get(idempotency_key)

    def receive_fire(
        self, schedule_id: str, fire_time: datetime, missed: str | None = None
    ) -> tuple[FireVerdict, str, ev.RunQueued | None]:
        """Judge one delivery of a timer fire against this agent's schedules and record it: a
        fire records TimerFired and queues its run (trigger ``schedule_<kind>``, the schedule's
        focus); a second delivery of (schedule, fire time), or a fire of an ended schedule,
        records TimerDeduplicated; a fire the misfire policy gave up records TimerMissed."""
        verdict, reason = self._fire_verdict(schedule_id, fire_time, missed)
        if verdict != "fire":
            event = ev.TimerDeduplicated if verdict == "duplicate" else ev.TimerMissed
            self.record(event, schedule_id=schedule_id, fire_time=fire_time, reason=reason)
            return verdict, reason, None
        schedule = self.state.schedules[schedule_id]
        owner = schedule.owner_run_id
        kind, focus = schedule.kind, schedule.focus
        self.record(
            ev.TimerFired,
            schedule_id=schedule_id,
            fire_time=fire_time,
            run_id=run_stream_id(self.agent_id, self.state.run_count + 1),
        )
        context = {
            "schedule_id": schedule_id,
            "fire_time": fire_time.isoformat(),
            "scheduled_by_run_id": str(owner) if owner else None,
        }
        return "fire", "", self.queue_run(f"schedule_{kind}", focus, None, context)

    @property
    def disabled_tools(self) -> frozenset[str]:
        return frozenset(self.state.disabled_tools)

    def change_tools(
        self, enable: Collection[str], disable: Collection[str], known: Collection[str]
    ) -> ev.ToolsChanged | None:
        """Enable and disable tools by name (ToolsChanged), or None when nothing changes.

        ``known`` is what the agent's app has today; a disabled tool the app no longer has can
        still be enabled (so a removed tool's switch is not stuck). A name in both lists, or one
        the agent does not know, raises (UnknownTools, ValueError) and records nothing."""
        both = set(enable) & set(disable)
        if both:
            raise ValueError(f"both enabled and disabled: {', '.join(sorted(both))}")
        unknown = (set(enable) - set(known) - self.disabled_tools) | (set(disable) - set(known))
        if unknown:
            raise UnknownTools(
                f"agent {self.agent_id!r} has no tool {', '.join(map(repr, sorted(unknown)))};"
                f" its tools: {', '.join(sorted(known)) or 'none'}"
            )
        enabled = sorted(set(enable) & self.disabled_tools)
        disabled = sorted(set(disable) - self.disabled_tools)
        if not enabled and not disabled:
            return None
        changed = self.record(ev.ToolsChanged, enabled=enabled, disabled=disabled)
        assert isinstance(changed, ev.ToolsChanged)
        return changed

    def cancel_schedule(self, schedule_id: str, by: str, reason: str = "") -> None:
        """Cancel an active schedule (ScheduleCancelled, naming who); UnknownSchedule when the
        agent has no such active schedule."""
        if schedule_id not in self.state.schedules:
            raise UnknownSchedule(f"no active schedule {schedule_id!r} of agent {self.agent_id}")
        self.record(ev.ScheduleCancelled, schedule_id=schedule_id, reason=reason, by=by)

    def _fire_verdict(
        self, schedule_id: str, fire_time: datetime, missed: str | None
    ) -> tuple[FireVerdict, str]:
        schedule = self.state.schedules.get(schedule_id)
        if schedule is None:
            ended = self.state.ended_schedules.get(schedule_id)
            return "duplicate", ENDED_REASONS.get(ended or "", "no such schedule of this agent")
        if schedule.last_fire_time is not None and fire_time <= schedule.last_fire_time:
            return "duplicate", f"already fired at {schedule.last_fire_time.isoformat()}"
        if missed is not None:
            return "missed", missed
        return "fire", ""

    def request_approval(
        self,
        run_id: UUID,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        approvers: Collection[str],
        timeout_s: float,
    ) -> str:
        """Record that a call waits for approval; its id (the same for the same call)."""
        approval_id = approval_id_for(run_id, call_id)
        self.record(
            ev.ApprovalRequested,
            approval_id=approval_id,
            agent_id=self.agent_id,
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            reason=reason,
            approvers=list(approvers),
            expires_at=now() + timedelta(seconds=timeout_s),
        )
        return approval_id

    def approval_for(self, run_id: UUID, call_id: str) -> Approval | None:
        return self.state.approvals.get(approval_id_for(run_id, call_id))

    def answer_approval(
        self,
        approval_id: str,
        approve: bool,
        by: str,
        note: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> Approval:
        """Record a person's answer; ApprovalClosed when there is nothing to answer (unknown,
        answered, past its expiry) or ``by`` may not answer it. The approval as answered."""
        approval = self.state.approvals.get(approval_id)
        if approval is None:
            raise UnknownApproval(f"no approval {approval_id!r} for agent {self.agent_id}")
        if approval.status == "pending" and approval.expires_at <= now():
            raise ApprovalClosed(f"approval {approval_id} expired at {approval.expires_at}")
        if approval.status != "pending":
            raise ApprovalClosed(f"approval {approval_id} is already {approval.status}")
        if approval.approvers and by not in approval.approvers:
            raise ApprovalClosed(
                f"{by!r} may not answer approval {approval_id} (approvers: "
                f"{', '.join(approval.approvers)})"
            )
        if approve:
            self.record(
                ev.ApprovalGranted, approval_id=approval_id, by=by, note=note, arguments=arguments
            )
        else:
            self.record(ev.ApprovalDenied, approval_id=approval_id, by=by, note=note)
        return approval

    def expire_approvals(self, at: datetime) -> list[UUID]:
        """Record ApprovalExpired for pending approvals past their time; their runs."""
        due = [
            (approval_id, a.run_id)
            for approval_id, a in self.state.approvals.items()
            if a.status == "pending" and a.expires_at <= at
        ]
        for approval_id, _ in due:
            self.record(ev.ApprovalExpired, approval_id=approval_id)
        return [run_id for _, run_id in due]

    def pending_approvals(self) -> list[tuple[str, Approval]]:
        return [(i, a) for i, a in self.state.approvals.items() if a.status == "pending"]

    def add_memory(self, memory_id: UUID, run_id: UUID, limit: int) -> list[UUID]:
        """Count a run's new memory among the agent's active ones (MemoryAdded); at ``limit``
        active memories, the oldest are archived first (MemoryArchived) to make room. The
        archived ids, oldest first."""
        over = len(self.state.memories) + 1 - limit
        archived = self.state.memories[: max(0, over)]
        if archived:
            self.record(
                ev.MemoryArchived,
                memory_ids=archived,
                reason=f"the agent reached its limit of {limit} active memories",
            )
        self.record(ev.MemoryAdded, memory_id=memory_id, run_id=run_id)
        return archived

    def app_failed(self, app_dir: str, error: str, details: str = "") -> None:
        """Record that the app does not load (AppLoadFailed), once per distinct error."""
        if self.state.app_error != error:
            self.record(ev.AppLoadFailed, app_dir=app_dir, error=error, details=details)

    def _on_AgentRegistered(self, e: ev.AgentRegistered) -> None:
        self.state.agent_id = e.agent_id
        self.state.app_dir = e.app_dir
        self.state.registered_at = e.timestamp
        self.state.parent_agent_id = e.parent_agent_id
        self.state.depth = e.depth
        self.state.withheld_tools = list(e.withheld_tools)

    def _on_SubAgentSpawned(self, e: ev.SubAgentSpawned) -> None:
        if e.spawn_id in self.state.spawns:  # its end was recorded first
            return
        self.state.spawns[e.spawn_id] = Spawn(
            run_id=e.run_id,
            call_id=e.call_id,
            child_agent_id=e.child_agent_id,
            child_run_id=e.child_run_id,
            wait=e.wait,
        )

    def _on_SubAgentFinished(self, e: ev.SubAgentFinished) -> None:
        spawn = self.state.spawns.setdefault(
            e.spawn_id, Spawn(e.run_id, e.call_id, e.child_agent_id, e.child_run_id, e.wait)
        )
        if spawn.finished:
            return
        spawn.status, spawn.answer = e.status, e.answer
        spawn.tokens, spawn.cost_usd = e.tokens, e.cost_usd
        finished = [i for i, s in self.state.spawns.items() if s.finished]
        for old in finished[: max(0, len(finished) - FINISHED_SPAWNS_KEPT)]:
            del self.state.spawns[old]

    def _on_AppAttached(self, e: ev.AppAttached) -> None:
        self.state.app_dir = e.app_dir

    def _on_IdentityLoaded(self, e: ev.IdentityLoaded) -> None:
        self.state.soul_sha256 = e.soul_sha256
        self.state.identity_sha256 = e.identity_sha256
        self.state.skills = dict(e.skills)
        self.state.config_sha256 = e.config_sha256
        self.state.code_sha256 = e.code_sha256
        self.state.identity_versions += 1
        self.state.app_error = None
        self.state.app_warning = None

    def _on_AgentWarning(self, e: ev.AgentWarning) -> None:
        if e.source == PREVIOUS_APP_KEPT:
            self.state.app_warning = e.message.partition("\n")[0]

    def _on_AppLoadFailed(self, e: ev.AppLoadFailed) -> None:
        self.state.app_error = e.error

    def _on_RunQueued(self, e: ev.RunQueued) -> None:
        self.state.run_count = e.run_no
        self.state.last_run_id = e.run_id
        self.state.pending_inbound = 0
        self.state.inbound = []
        if e.idempotency_key is not None:
            keys = self.state.idempotency_keys
            keys[e.idempotency_key] = e.run_id
            while len(keys) > IDEMPOTENCY_KEYS_KEPT:
                del keys[next(iter(keys))]

    def _on_InboundReceived(self, e: ev.InboundReceived) -> None:
        self.state.pending_inbound += 1
        self.state.inbound = [*self.state.inbound, e.originator_version][-INBOUND_KEPT:]

    def _on_ScheduleRequested(self, e: ev.ScheduleRequested) -> None:
        self.state.schedules[e.schedule_id] = ActiveSchedule(
            kind=e.kind, focus=e.focus, owner_run_id=e.owner_run_id, cron=e.cron, fire_at=e.fire_at
        )

    def _on_ScheduleRegistered(self, e: ev.ScheduleRegistered) -> None:
        schedule = self.state.schedules.get(e.schedule_id)
        if schedule is not None:
            schedule.backend_id = e.backend_id

    def _on_ScheduleCancelled(self, e: ev.ScheduleCancelled) -> None:
        self.state.schedules.pop(e.schedule_id, None)
        self._ended(e.schedule_id, "cancelled")

    def _on_TimerFired(self, e: ev.TimerFired) -> None:
        self.state.timers_fired += 1
        self.state.pending_inbound += 1
        schedule = self.state.schedules.get(e.schedule_id)
        if schedule is None:
            return
        schedule.last_fire_time = e.fire_time
        if schedule.kind == "once":
            del self.state.schedules[e.schedule_id]
            self._ended(e.schedule_id, "fired")

    def _on_TimerMissed(self, e: ev.TimerMissed) -> None:
        schedule = self.state.schedules.get(e.schedule_id)
        if schedule is not None and schedule.kind == "once":
            del self.state.schedules[e.schedule_id]
            self._ended(e.schedule_id, "missed")

    def _ended(self, schedule_id: str, how: str) -> None:
        ended = self.state.ended_schedules
        ended[schedule_id] = how
        while len(ended) > ENDED_SCHEDULES_KEPT:
            del ended[next(iter(ended))]

    def _on_ToolsChanged(self, e: ev.ToolsChanged) -> None:
        disabled = (set(self.state.disabled_tools) - set(e.enabled)) | set(e.disabled)
        self.state.disabled_tools = sorted(disabled)

    def _on_MemoryAdded(self, e: ev.MemoryAdded) -> None:
        self.state.memories.append(e.memory_id)

    def _on_MemoryArchived(self, e: ev.MemoryArchived) -> None:
        gone = set(e.memory_ids)
        self.state.memories = [m for m in self.state.memories if m not in gone]

    def _on_MemoryForgotten(self, e: ev.MemoryForgotten) -> None:
        if e.memory_id in self.state.memories:
            self.state.memories.remove(e.memory_id)

    def _on_ApprovalRequested(self, e: ev.ApprovalRequested) -> None:
        self.state.approvals[e.approval_id] = Approval(
            run_id=e.run_id,
            call_id=e.call_id,
            tool=e.tool,
            arguments=dict(e.arguments),
            reason=e.reason,
            approvers=list(e.approvers),
            requested_at=e.timestamp,
            expires_at=e.expires_at,
        )

    def _answered(
        self, approval_id: str, status: Literal["granted", "denied", "expired"], e: LedgerEvent
    ) -> Approval | None:
        approval = self.state.approvals.get(approval_id)
        if approval is None or approval.status != "pending":
            return None
        approval.status, approval.answered_at = status, e.timestamp
        answered = [i for i, a in self.state.approvals.items() if a.status != "pending"]
        for old in answered[: max(0, len(answered) - ANSWERED_APPROVALS_KEPT)]:
            del self.state.approvals[old]
        return approval

    def _on_ApprovalGranted(self, e: ev.ApprovalGranted) -> None:
        if (approval := self._answered(e.approval_id, "granted", e)) is not None:
            approval.by, approval.note = e.by, e.note
            approval.edited_arguments = dict(e.arguments) if e.arguments is not None else None

    def _on_ApprovalDenied(self, e: ev.ApprovalDenied) -> None:
        if (approval := self._answered(e.approval_id, "denied", e)) is not None:
            approval.by, approval.note = e.by, e.note

    def _on_ApprovalExpired(self, e: ev.ApprovalExpired) -> None:
        self._answered(e.approval_id, "expired", e)

    def _on_BudgetExceeded(self, e: ev.BudgetExceeded) -> None:
        self.state.budget_exceeded += 1

    handlers: ClassVar[Mapping[type[LedgerEvent], Handler]] = {
        ev.AgentRegistered: _on_AgentRegistered,
        ev.AppAttached: _on_AppAttached,
        ev.IdentityLoaded: _on_IdentityLoaded,
        ev.AgentWarning: _on_AgentWarning,
        ev.AppLoadFailed: _on_AppLoadFailed,
        ev.RunQueued: _on_RunQueued,
        ev.InboundReceived: _on_InboundReceived,
        ev.ScheduleRequested: _on_ScheduleRequested,
        ev.ScheduleRegistered: _on_ScheduleRegistered,
        ev.ScheduleCancelled: _on_ScheduleCancelled,
        ev.TimerFired: _on_TimerFired,
        ev.TimerMissed: _on_TimerMissed,
        ev.SubAgentSpawned: _on_SubAgentSpawned,
        ev.SubAgentFinished: _on_SubAgentFinished,
        ev.ToolsChanged: _on_ToolsChanged,
        ev.MemoryAdded: _on_MemoryAdded,
        ev.MemoryArchived: _on_MemoryArchived,
        ev.MemoryForgotten: _on_MemoryForgotten,
        ev.ApprovalRequested: _on_ApprovalRequested,
        ev.ApprovalGranted: _on_ApprovalGranted,
        ev.ApprovalDenied: _on_ApprovalDenied,
        ev.ApprovalExpired: _on_ApprovalExpired,
        ev.BudgetExceeded: _on_BudgetExceeded,
    }
    ignored: ClassVar[frozenset[type[LedgerEvent]]] = frozenset(
        {ev.TimerDeduplicated, ev.RunSealed}
    )


class Run(_Aggregate):
    stream: ClassVar[Stream] = "run"
    state: RunState

    def __init__(self, stream_id: UUID, state: RunState, version: int = 0):
        super().__init__(stream_id, state, version)
        self.head: tuple[int, bytes] | None = None
        """(version, hash) of this stream's last event as this process committed it (the ledger
        sets it): sealing the run needs that hash, which it need not read back then. None:
        not known here (a run loaded from the ledger)."""

    @classmethod
    def blank(cls, stream_id: UUID) -> Run:
        return cls(stream_id, RunState())

    @classmethod
    def start(cls, agent_id: str, queued: ev.RunQueued) -> Run:
        """The run a RunQueued accepted, with its RunStarted pending."""
        run = cls.blank(queued.run_id)
        run.record(
            ev.RunStarted,
            agent_id=agent_id,
            run_no=queued.run_no,
            trigger=queued.trigger,
            focus=queued.focus,
            payload=dict(queued.payload),
            context=dict(queued.context),
            inbound=list(queued.inbound),
        )
        return run

    def end(self, outcome: type[ev.RunEnded], **fields: Any) -> ev.LedgerEvent:
        """Record the run's one end event; a second end is a bug, refused."""
        if self.state.ended or any(isinstance(e, ev.RunEnded) for e in self._pending):
            raise RuntimeError(f"run {self.id} already ended ({self.state.status})")
        return self.record(outcome, **fields)

    def _on_RunStarted(self, e: ev.RunStarted) -> None:
        self.state.agent_id = e.agent_id
        self.state.run_no = e.run_no
        self.state.trigger = e.trigger
        self.state.focus = e.focus
        self.state.started_at = e.timestamp
        self.state.status = "running"
        self.state.inbound = list(e.inbound)

    def _on_LLMResponded(self, e: ev.LLMResponded) -> None:
        self.state.llm_calls += 1
        self.state.tokens += e.usage.get("total_tokens", 0)
        self.state.cost_usd += e.cost_usd

    def _on_ToolCallRequested(self, e: ev.ToolCallRequested) -> None:
        self.state.tool_calls += 1
        self.state.calls_made += 1
        self.state.open_calls[e.call_id] = e.tool
        self.state.tools_called.append(e.tool)

    def _close_call(self, e: Any) -> None:
        self.state.open_calls.pop(e.call_id, None)

    def _refuse_call(self, e: ev.ToolCallDenied | ev.ToolCallRejected) -> None:
        """A call refused before it was requested still counts toward the limit."""
        self.state.calls_made += 1

    def _on_RunParked(self, e: ev.RunParked) -> None:
        self.state.status = "parked"

    def _on_SubAgentCharged(self, e: ev.SubAgentCharged) -> None:
        self.state.tokens += e.tokens
        self.state.cost_usd += e.cost_usd

    def _on_RunInterrupted(self, e: ev.RunInterrupted) -> None:
        self.state.status = "interrupted"

    def _on_RunResumed(self, e: ev.RunResumed) -> None:
        self.state.status = "running"

    def _end(self, e: ev.RunEnded) -> None:
        self.state.status = type(e).__name__.removeprefix("Run").lower()
        self.state.ended = True
        self.state.duration_ms = e.duration_ms

    handlers: ClassVar[Mapping[type[LedgerEvent], Handler]] = {
        ev.RunStarted: _on_RunStarted,
        ev.LLMResponded: _on_LLMResponded,
        ev.ToolCallRequested: _on_ToolCallRequested,
        ev.ToolCallDenied: _refuse_call,
        ev.ToolCallRejected: _refuse_call,
        ev.ToolCallSucceeded: _close_call,
        ev.ToolCallFailed: _close_call,
        ev.ToolCallTimedOut: _close_call,
        ev.ToolOutcomeUnknown: _close_call,
        ev.RunParked: _on_RunParked,
        ev.SubAgentCharged: _on_SubAgentCharged,
        ev.RunInterrupted: _on_RunInterrupted,
        ev.RunResumed: _on_RunResumed,
        ev.RunCompleted: _end,
        ev.RunFailed: _end,
        ev.RunTimedOut: _end,
        ev.RunTerminated: _end,
        ev.RunSkipped: _end,
    }
    ignored: ClassVar[frozenset[type[LedgerEvent]]] = frozenset(
        {
            ev.VisibleToolsResolved,
            ev.DecisionLogged,
            ev.RunWarning,
            ev.MemoryRemembered,
            ev.MessageSent,
        }
    )


def projector(cls: type[A]) -> Callable[[A | None, Iterable[Any]], A | None]:
    """eventsourcing's projector for ``cls``: a snapshot restores the state, events apply."""

    def project(aggregate: A | None, events: Iterable[Any]) -> A | None:
        for event in events:
            if isinstance(event, AgentSnapshot):
                aggregate = event.restore()  # type: ignore[assignment]
                continue
            if aggregate is None:
                aggregate = cls.blank(event.originator_id)
            aggregate.apply(event)
        return aggregate

    return project
