"""A list of every agent's (status, pending approvals) as a principal sees it: the agents its
grants cover; the server-wide parts of the status only with an unscoped viewer grant."""

from __future__ import annotations

from owlclaw.access.authorize import Principal, bootstrap
from owlclaw.access.roles import parse_grant
from owlclaw.reports.approvals import PendingApproval
from owlclaw.server.seen import seen_approvals, seen_status

SCOPED = Principal("ann", (parse_grant("viewer:acme.*"), parse_grant("operator")))


def test_the_status_shows_the_agents_the_grants_cover() -> None:
    report = {
        "agents": {"acme.bot": {}, "globex.bot": {}},
        "placement": "local",
        "workers": [{"name": "heartbeat:globex.bot"}],
        "mcp_servers": {"time": "ready"},
    }
    assert seen_status(SCOPED, report) == {"agents": {"acme.bot": {}}, "placement": "local"}
    assert seen_status(bootstrap(), report) == report
    everywhere = Principal("bob", (parse_grant("viewer"),))
    assert seen_status(everywhere, report) == report


def test_the_approvals_are_those_of_the_agents_the_grants_cover() -> None:
    pending = [approval("acme.bot"), approval("globex.bot"), approval("acme.two")]
    assert [a.agent_id for a in seen_approvals(SCOPED, pending)] == ["acme.bot", "acme.two"]
    assert seen_approvals(bootstrap(), pending) == pending


def approval(agent_id: str) -> PendingApproval:
    return PendingApproval(agent_id, agent_id, "run", "tool", {}, "", [], "", "")
