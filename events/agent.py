"""The Agent aggregate: one stream per agent, and the operations that change it.

The domain operations (queue a run, judge a timer fire, change tools; approvals come from
``events.approvals``) are methods here, so every writer derives run numbers, idleness and
verdicts the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

import msgspec

from events import catalog as ev
from events.agent_state import (
    ANSWERED_REPLIES_KEPT,
    ENDED_REASONS,
    ENDED_SCHEDULES_KEPT,
    FINISHED_SPAWNS_KEPT,
    HEARTBEAT,
    IDEMPOTENCY_KEYS_KEPT,
    INBOUND_KEPT,
    INBOUND_TRIGGERS,
    NO_REPLY,
    PREVIOUS_APP_KEPT,
    WOKEN_BY,
    ActiveSchedule,
    AgentState,
    AwaitedReply,
    FireVerdict,
    Spawn,
    UnknownSchedule,
    UnknownTools,
)
from events.aggregate import Aggregate, Handler
from events.approvals import AgentApprovals
from events.catalog import LedgerEvent, Stream
from events.errors import StreamConflict
from events.keys import DataKey
from events.streams import now, run_stream_id


class AgentSnapshot(LedgerEvent, frozen=True, kw_only=True):
    """The agent's state at a version. Its copies of sealed content (approvals' arguments,
    sub-agents' answers, schedules' focus) are stored sealed under the keys their events were
    (``with_content``), so a snapshot holds no plaintext and reads ``[erased]`` once erased."""

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

    def with_content(self, change: ev.ContentChange) -> AgentSnapshot:
        agent, at = self.originator_id, f"{self.originator_id}:{self.originator_version}"
        replace = msgspec.structs.replace
        approvals = {
            i: replace(
                a,
                arguments=change(
                    DataKey("run", a.run_id, agent), f"{at}:approval:{i}:arguments", a.arguments
                ),
                edited_arguments=change(
                    DataKey("agent", agent, agent), f"{at}:approval:{i}:edited", a.edited_arguments
                ),
            )
            for i, a in self.state.approvals.items()
        }
        spawns = {
            i: replace(
                sp, answer=change(DataKey("run", sp.run_id, agent), f"{at}:spawn:{i}", sp.answer)
            )
            for i, sp in self.state.spawns.items()
        }
        schedules = {
            i: replace(
                sc,
                focus=change(
                    ev.schedule_key(agent, sc.owner_run_id), f"{at}:schedule:{i}", sc.focus
                ),
            )
            for i, sc in self.state.schedules.items()
        }
        state = replace(self.state, approvals=approvals, spawns=spawns, schedules=schedules)
        return replace(self, state=state)

    def restore(self) -> Agent:
        state = msgspec.convert(msgspec.to_builtins(self.state), AgentState)
        return Agent(self.originator_id, state, self.originator_version)


class Agent(Aggregate, AgentApprovals):
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

    def record_again(self, event: LedgerEvent) -> LedgerEvent:
        """A rebased RunQueued keeps its run number and id (its caller may already hold them),
        so it goes on top only where that number is still the next: else another writer
        queued a run meanwhile, and re-recording it would fork the agent's run numbering."""
        if isinstance(event, ev.RunQueued) and event.run_no != self.state.run_count + 1:
            raise StreamConflict(
                f"agent {self.agent_id}: run {event.run_no} was queued by another writer "
                f"meanwhile (this stream is at run {self.state.run_count})"
            )
        return super().record_again(event)

    def queue_run(
        self,
        trigger: str,
        focus: str | None = None,
        payload: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
    ) -> ev.RunQueued:
        """Accept a run (RunQueued, pending): its number and id are fixed from here, and what it
        needs to start is in the event, so a queued run survives a crash. A heartbeat with nothing
        pending (no inbound event, no source in its payload's ``woken_by``) is queued ``idle``
        (skipped without a model call)."""
        run_no = self.state.run_count + 1
        queued = self.record(
            ev.RunQueued,
            run_id=run_stream_id(self.agent_id, run_no),
            run_no=run_no,
            trigger=trigger,
            focus=focus,
            payload=payload or {},
            context=context or {},
            idle=trigger == HEARTBEAT
            and self.state.pending_inbound == 0
            and not (payload or {}).get(WOKEN_BY),
            idempotency_key=idempotency_key,
            inbound=list(self.state.inbound) if trigger in INBOUND_TRIGGERS else [],
            by=by,
        )
        assert isinstance(queued, ev.RunQueued)
        return queued

    def run_for_key(self, idempotency_key: str) -> UUID | None:
        """The run already accepted with this idempotency key, if the agent remembers one."""
        return self.state.idempotency_keys.get(idempotency_key)

    def receive_fire(
        self,
        schedule_id: str,
        fire_time: datetime,
        missed: str | None = None,
        occurrences: int = 1,
        first_fire_time: datetime | None = None,
    ) -> tuple[FireVerdict, str, ev.RunQueued | None]:
        """Judge one delivery of a timer fire against this agent's schedules and record it: a
        fire records TimerFired and queues its run (trigger ``schedule_<kind>``, the schedule's
        focus); a second delivery of (schedule, fire time), or a fire of an ended schedule,
        records TimerDeduplicated; fires the on_missed policy gave up (``occurrences`` of them,
        from ``first_fire_time`` to ``fire_time``) record one TimerMissed."""
        verdict, reason = self._fire_verdict(schedule_id, fire_time, missed)
        if verdict == "duplicate":
            self.record(
                ev.TimerDeduplicated, schedule_id=schedule_id, fire_time=fire_time, reason=reason
            )
            return verdict, reason, None
        if verdict == "missed":
            self.record(
                ev.TimerMissed,
                schedule_id=schedule_id,
                fire_time=fire_time,
                reason=reason,
                occurrences=occurrences,
                first_fire_time=first_fire_time,
            )
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
        self, enable: Collection[str], disable: Collection[str], known: Collection[str], *, by: str
    ) -> ev.ToolsChanged | None:
        """Enable and disable tools by name (ToolsChanged, naming ``by``), or None when nothing
        changes.

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
        changed = self.record(ev.ToolsChanged, enabled=enabled, disabled=disabled, by=by)
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

    def expire_replies(self, at: datetime) -> list[UUID]:
        """Record ``no_reply`` (AgentReplyReceived) for each awaited reply whose deadline is
        ``at`` or earlier; the runs waiting for them, to resume."""
        runs = []
        for message_id, awaited in list(self.state.replies.items()):
            if awaited.answered or awaited.reply_by is None or awaited.reply_by > at:
                continue
            self.record(
                ev.AgentReplyReceived,
                message_id=message_id,
                run_id=awaited.run_id,
                call_id=awaited.call_id,
                from_agent_id=awaited.to_agent_id,
                status=NO_REPLY,
            )
            runs.append(awaited.run_id)
        return runs

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

    def _on_AgentMessageSent(self, e: ev.AgentMessageSent) -> None:
        if e.expect_reply and e.message_id not in self.state.replies:  # else: answered first
            self.state.replies[e.message_id] = AwaitedReply(
                e.run_id, e.call_id, e.to_agent_id, e.reply_by, e.to_run_id
            )

    def _on_AgentReplyReceived(self, e: ev.AgentReplyReceived) -> None:
        awaited = self.state.replies.setdefault(
            e.message_id, AwaitedReply(e.run_id, e.call_id, e.from_agent_id)
        )
        if awaited.answered:
            return
        awaited.status, awaited.reply_version = e.status, e.originator_version
        answered = [i for i, r in self.state.replies.items() if r.answered]
        for old in answered[: max(0, len(answered) - ANSWERED_REPLIES_KEPT)]:
            del self.state.replies[old]

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
            kind=e.kind,
            focus=e.focus,
            owner_run_id=e.owner_run_id,
            cron=e.cron,
            fire_at=e.fire_at,
            on_missed=e.on_missed,
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
        ev.AgentMessageSent: _on_AgentMessageSent,
        ev.AgentReplyReceived: _on_AgentReplyReceived,
        ev.ToolsChanged: _on_ToolsChanged,
        ev.MemoryAdded: _on_MemoryAdded,
        ev.MemoryArchived: _on_MemoryArchived,
        ev.MemoryForgotten: _on_MemoryForgotten,
        ev.ApprovalRequested: AgentApprovals._on_ApprovalRequested,
        ev.ApprovalGranted: AgentApprovals._on_ApprovalGranted,
        ev.ApprovalDenied: AgentApprovals._on_ApprovalDenied,
        ev.ApprovalExpired: AgentApprovals._on_ApprovalExpired,
        ev.BudgetExceeded: _on_BudgetExceeded,
    }
    ignored: ClassVar[frozenset[type[LedgerEvent]]] = frozenset(
        {ev.TimerDeduplicated, ev.RunSealed, ev.ArchiveSealed, ev.DataErased, ev.MemoryExpired}
    )
