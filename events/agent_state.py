"""The Agent aggregate's state: its schedules, approvals, sub-agent spawns and limits kept.

Its own module because readers (views, the console, tools) use these structs and the errors
an Agent raises without needing the aggregate's operations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from events.argument_digest import arguments_digest
from events.catalog import ApprovalKind, OnMissed

ENDED_SCHEDULES_KEPT = 1000
IDEMPOTENCY_KEYS_KEPT = 1000
ANSWERED_APPROVALS_KEPT = 1000
FINISHED_SPAWNS_KEPT = 1000
ANSWERED_REPLIES_KEPT = 1000
INBOUND_KEPT = 20
"""Idempotency keys of accepted runs an agent remembers (its last this many keyed runs)."""
PREVIOUS_APP_KEPT = "identity"
"""The AgentWarning source of an app change that does not load: the previous version serves."""
HEARTBEAT = "heartbeat"
"""The trigger of heartbeat runs: one with nothing pending is skipped without a model call."""
WOKEN_BY = "woken_by"
"""The key of a heartbeat's payload listing the heartbeat sources that found something: a
heartbeat with any is not idle, even with no inbound event pending."""
FireVerdict = Literal["fire", "duplicate", "missed"]
ENDED_REASONS = {
    "cancelled": "the schedule was cancelled",
    "fired": "this one-off schedule already fired",
    "missed": "this one-off schedule was already recorded as missed",
}
AGENT_MESSAGE = "agent_message"
"""The trigger of a run another agent's message started (send_to_agent)."""
INBOUND_TRIGGERS = (HEARTBEAT, AGENT_MESSAGE)
"""Runs given the inbound events that arrived since the agent's last run."""
NO_REPLY = "no_reply"
"""The status of an awaited reply whose deadline passed."""


class ActiveSchedule(msgspec.Struct):
    kind: str
    focus: str
    owner_run_id: UUID | None = None
    cron: str | None = None
    fire_at: datetime | None = None
    backend_id: str | None = None
    last_fire_time: datetime | None = None
    on_missed: OnMissed = "one"
    """The schedule's policy for fires missed while the timer service was down."""


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
    digest: str = ""
    """The digest of ``arguments`` as requested ("" in a request recorded before digests)."""
    approvals_required: int = 1
    granted_by: list[str] = []
    """The principals whose grants stand for the arguments now shown (an edit starts anew)."""
    granters: list[str] = []
    """Who authenticated each of those grants (its principal, else its ``by``): two grants
    through one token are one approver, whatever names they give."""
    kind: ApprovalKind = "call"
    answer: str | None = None
    """A question's answer, once given."""

    @property
    def options(self) -> list[str]:
        """A question's options (none: free text)."""
        return list(self.arguments.get("options") or []) if self.kind == "question" else []

    def shown(self) -> tuple[dict[str, Any], str]:
        """The arguments an answer is given for now (an approver's edit, else the call's) and
        their digest, which the answer must name."""
        if self.edited_arguments is not None:
            return self.edited_arguments, arguments_digest(self.edited_arguments)
        return self.arguments, self.digest or arguments_digest(self.arguments)


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


class AwaitedReply(msgspec.Struct):
    """A message one of this agent's runs sent expecting a reply, and the reply once it came
    (its text is in the AgentReplyReceived at ``reply_version``)."""

    run_id: UUID
    call_id: str
    to_agent_id: str
    reply_by: datetime | None = None
    to_run_id: UUID | None = None
    """The target's run whose answer is the reply."""
    status: str = "waiting"
    reply_version: int = 0

    @property
    def answered(self) -> bool:
        return self.status != "waiting"


class ApprovalClosed(ValueError):
    """An answer to an approval that is already answered or expired, or that this person may
    not give (nothing recorded)."""


class UnknownApproval(ApprovalClosed):
    """No such approval."""


class DigestMismatch(ApprovalClosed):
    """An answer naming another digest than the arguments the approval now shows: the person
    saw other arguments (or none), so nothing is recorded."""


class SameApprover(ApprovalClosed):
    """A second grant by a principal whose grant already stands: two approvals need two people."""


class InvalidAnswer(ApprovalClosed):
    """An answer that does not fit what was asked: text for a call, a yes or no for a
    question, an answer outside a question's options or over its length (nothing recorded)."""


class SelfApproval(ApprovalClosed):
    """An answer given as the agent itself, or as an agent of its spawn tree (its parents, its
    sub-agents and theirs): an agent never approves its own calls."""


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
    replies: dict[str, AwaitedReply] = {}
    """Message id -> the reply a run awaits (send_to_agent with expect_reply): awaited ones,
    and the latest answered."""


class UnknownTools(ValueError):
    """An enable/disable named tools the agent does not have (the message names them)."""


class UnknownSchedule(ValueError):
    """A cancel of a schedule the agent does not have active (nothing recorded)."""
