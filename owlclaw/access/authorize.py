"""The one authorization function: (principal, action, agent) -> allowed, or a refusal naming
the role and the scope that were missing.

Each action needs exactly one role; roles do not imply one another (an admin who should also
approve holds ``approver`` too, and that grant is recorded), so each grant says plainly what it
allows. An action on one agent needs a grant covering that agent; an action on the whole server
(``agent_id`` None: metrics, principals) needs an unscoped grant. A list of every agent's (status,
pending approvals) is shown to a principal with the action's role on some agents, filtered to
those (``authorize_some``, then ``authorize`` per agent).
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from owlclaw.access.roles import Grant, Role


class Action(StrEnum):
    READ_LEDGER = "ledger.read"
    READ_RUNS = "runs.read"
    READ_MEMORY = "memory.read"
    READ_METRICS = "metrics.read"
    READ_STATUS = "status.read"
    READ_APPROVALS = "approvals.read"
    TRIGGER = "run.trigger"
    SEND_EVENT = "event.send"
    FIRE = "timer.fire"
    CANCEL = "run.cancel"
    SCHEDULES = "schedules.change"
    TOOLS = "tools.change"
    ANSWER_APPROVAL = "approval.answer"
    PRINCIPALS = "principals.manage"
    ERASE = "data.erase"
    KEYS = "keys.manage"


REQUIRED: dict[Action, Role] = {
    Action.READ_LEDGER: Role.VIEWER,
    Action.READ_RUNS: Role.VIEWER,
    Action.READ_MEMORY: Role.VIEWER,
    Action.READ_METRICS: Role.VIEWER,
    Action.READ_STATUS: Role.VIEWER,
    Action.READ_APPROVALS: Role.VIEWER,
    Action.TRIGGER: Role.OPERATOR,
    Action.SEND_EVENT: Role.OPERATOR,
    Action.FIRE: Role.OPERATOR,
    Action.CANCEL: Role.OPERATOR,
    Action.SCHEDULES: Role.OPERATOR,
    Action.TOOLS: Role.OPERATOR,
    Action.ANSWER_APPROVAL: Role.APPROVER,
    Action.PRINCIPALS: Role.ADMIN,
    Action.ERASE: Role.ADMIN,
    Action.KEYS: Role.ADMIN,
}
"""The role each action needs: every action has exactly one."""

BOOTSTRAP = "server-token"
"""The principal of the server's single token: every role on every agent, for a one-person
install and to add the first principals. No principal may take this name."""


class Principal(msgspec.Struct, frozen=True):
    """Who a request authenticated as: its id (recorded as ``by`` on what it does) and grants."""

    name: str
    grants: tuple[Grant, ...]


def bootstrap() -> Principal:
    """The server token's principal."""
    return Principal(BOOTSTRAP, tuple(Grant(role) for role in Role))


class Refusal(msgspec.Struct, frozen=True):
    """Why a principal may not: the role it lacks, on what."""

    principal: str
    action: Action
    role: Role
    agent_id: str | None
    some: bool = False
    """Refused a list of agents: the role on any agent would do."""

    def __str__(self) -> str:
        if self.some:
            on = "some agent"
        else:
            on = "every agent" if self.agent_id is None else f"agent {self.agent_id!r}"
        role = self.role.value
        return f"{self.principal} may not {self.action.value}: it needs role {role} on {on}"

    def body(self) -> dict[str, str | None]:
        """The JSON of a 403 answering it."""
        return {
            "error": str(self),
            "code": "forbidden",
            "role": self.role.value,
            "agent_id": self.agent_id,
        }


def authorize(principal: Principal, action: Action, agent_id: str | None) -> Refusal | None:
    """None when one of the principal's grants has the action's role and covers the agent."""
    role = REQUIRED[action]
    if any(g.role is role and g.covers(agent_id) for g in principal.grants):
        return None
    return Refusal(principal.name, action, role, agent_id)


def authorize_some(principal: Principal, action: Action) -> Refusal | None:
    """None when one of the principal's grants has the action's role, on whichever agents: a list
    of every agent's is then shown filtered to the agents its grants cover."""
    role = REQUIRED[action]
    if any(g.role is role for g in principal.grants):
        return None
    return Refusal(principal.name, action, role, None, some=True)
