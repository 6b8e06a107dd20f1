"""What of a list of every agent's a principal sees: the agents its grants cover, so a tenant's
viewer reads its own agents' status and approvals, not a 403 and not the other tenants'.

The guard (or the MCP tool) has already checked the principal holds the role on some agents
(``authorize_some``); these only filter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from owlclaw.access.authorize import Action, Principal, authorize
from owlclaw.reports.approvals import Approvals, PendingApproval
from owlclaw.reports.listings import Schedules

SERVER_WIDE = ("workers", "mcp_servers", "startup")
"""Parts of the status report that are the whole server's (its workers name every agent with
a heartbeat; its start-up's timings): shown only to a principal who may read the status of every
agent."""


def sees_every_status(principal: Principal) -> bool:
    """May read every agent's status, and the server-wide parts of it."""
    return authorize(principal, Action.READ_STATUS, None) is None


def seen_status(principal: Principal, report: dict[str, Any]) -> dict[str, Any]:
    """``Service.report()``/``status()`` with the agents the principal may read the status of."""
    agents = report["agents"]
    seen = {
        key: value
        for key, value in report.items()
        if key not in SERVER_WIDE or sees_every_status(principal)
    }
    seen["agents"] = {
        agent_id: value
        for agent_id, value in agents.items()
        if authorize(principal, Action.READ_STATUS, agent_id) is None
    }
    return seen


def seen_approvals(
    principal: Principal, approvals: Sequence[PendingApproval]
) -> list[PendingApproval]:
    """The pending approvals of the agents the principal may read the approvals of."""
    return [a for a in approvals if authorize(principal, Action.READ_APPROVALS, a.agent_id) is None]


def seen_listing(principal: Principal, listing: Approvals) -> Approvals:
    """``owlclaw approvals``' listing with the approvals the principal may read."""
    seen = seen_approvals(principal, listing.pending)
    ids = {p.approval_id for p in seen}
    short = {i: prefix for i, prefix in listing.short.items() if i in ids}
    return Approvals(seen, short, [i for i in listing.served if i in ids])


def seen_schedules(principal: Principal, listing: Schedules) -> Schedules:
    """Every agent's schedules with those of the agents the principal may read the runs of."""
    rows = [
        r for r in listing.rows if authorize(principal, Action.READ_RUNS, r["agent_id"]) is None
    ]
    return Schedules(rows, listing.behind)
