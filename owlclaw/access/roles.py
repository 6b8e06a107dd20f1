"""Roles and the grants that scope them to agents.

A grant is a role, optionally limited to the agents whose ids match a glob pattern (a tenant is
a set of agents, ``acme.*``). Written ``operator:acme.*`` on the command line and in the ledger;
a bare ``viewer`` covers every agent. Unknown roles and malformed patterns are refused.
"""

from __future__ import annotations

import re
from enum import StrEnum
from fnmatch import fnmatchcase

import msgspec

from owlclaw.config import AGENT_GLOB


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    APPROVER = "approver"
    ADMIN = "admin"


PATTERN = re.compile(AGENT_GLOB)
"""An agent-id glob: agent-id characters (``owlclaw.app.AGENT_ID``) and ``* ? [ ] !``."""


class GrantInvalid(ValueError):
    """A grant that names an unknown role or a malformed agent pattern."""


class Grant(msgspec.Struct, frozen=True):
    role: Role
    agents: str | None = None
    """A glob over agent ids (case-sensitive); None: every agent."""

    def covers(self, agent_id: str | None) -> bool:
        """Whether this grant reaches ``agent_id``; None (no one agent: the whole server)
        only an unscoped grant reaches."""
        if self.agents is None:
            return True
        return agent_id is not None and fnmatchcase(agent_id, self.agents)

    def __str__(self) -> str:
        return self.role.value if self.agents is None else f"{self.role.value}:{self.agents}"


def parse_grant(text: str) -> Grant:
    """``role`` or ``role:pattern``; GrantInvalid naming what is wrong."""
    name, colon, pattern = text.strip().partition(":")
    try:
        role = Role(name)
    except ValueError:
        known = ", ".join(r.value for r in Role)
        raise GrantInvalid(f"unknown role {name!r} in {text!r} (roles: {known})") from None
    if not colon:
        return Grant(role)
    if not PATTERN.fullmatch(pattern):
        raise GrantInvalid(
            f"agent pattern {pattern!r} in {text!r}: 1-128 agent-id characters"
            " (letters, digits, '_', '.', '-') and the globs '*', '?', '[...]'"
        )
    return Grant(role, pattern)
