"""The authorization function: every action x role x in/out-of-scope agent, and glob scopes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owlclaw.access.authorize import (
    BOOTSTRAP,
    REQUIRED,
    Action,
    Principal,
    authorize,
    authorize_some,
    bootstrap,
)
from owlclaw.access.roles import Grant, GrantInvalid, Role, parse_grant

EXPECTED = {
    Role.VIEWER: {"ledger.read", "runs.read", "memory.read", "metrics.read", "status.read",
                  "approvals.read"},
    Role.OPERATOR: {"run.trigger", "event.send", "timer.fire", "run.cancel", "schedules.change",
                    "tools.change"},
    Role.APPROVER: {"approval.answer"},
    Role.ADMIN: {"principals.manage", "data.erase", "keys.manage"},
}  # fmt: skip

AGENT_ID = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,30}", fullmatch=True)


def test_every_action_needs_one_role_as_the_issue_lists() -> None:
    assert set(REQUIRED) == set(Action)
    for role, actions in EXPECTED.items():
        assert {a.value for a, r in REQUIRED.items() if r is role} == actions


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("role", list(Role))
def test_role_matrix(action: Action, role: Role) -> None:
    alice = Principal("alice", (Grant(role, "acme.*"),))
    allowed = REQUIRED[action] is role
    inside = authorize(alice, action, "acme.bot")
    assert (inside is None) is allowed
    outside = authorize(alice, action, "globex.bot")
    assert outside is not None
    assert outside.role is REQUIRED[action]
    assert outside.agent_id == "globex.bot"
    assert f"needs role {REQUIRED[action].value} on agent 'globex.bot'" in str(outside)
    whole = authorize(alice, action, None)  # server-wide: a scoped grant never reaches it
    assert whole is not None
    assert "on every agent" in str(whole)
    unscoped = Principal("bob", (Grant(role),))
    assert (authorize(unscoped, action, "globex.bot") is None) is allowed
    assert (authorize(unscoped, action, None) is None) is allowed


@pytest.mark.parametrize("action", list(Action))
def test_the_bootstrap_principal_may_do_everything(action: Action) -> None:
    assert bootstrap().name == BOOTSTRAP
    assert authorize(bootstrap(), action, "any.agent") is None
    assert authorize(bootstrap(), action, None) is None


@given(tenant=st.from_regex(r"[a-z]{1,8}", fullmatch=True), rest=AGENT_ID, other=AGENT_ID)
def test_a_tenant_pattern_covers_its_agents_only(tenant: str, rest: str, other: str) -> None:
    grant = parse_grant(f"operator:{tenant}.*")
    assert grant == Grant(Role.OPERATOR, f"{tenant}.*")
    assert grant.covers(f"{tenant}.{rest}")
    assert grant.covers(other) is other.startswith(f"{tenant}.")
    assert not grant.covers(None)


@given(agent_id=AGENT_ID)
def test_an_exact_pattern_covers_that_agent_alone(agent_id: str) -> None:
    grant = Grant(Role.VIEWER, agent_id.replace("[", "?").replace("]", "?"))
    assert grant.covers(agent_id)
    assert not grant.covers(agent_id + "x")


@given(grants=st.lists(st.sampled_from(["viewer", "operator:a*", "approver:b.?", "admin"])))
def test_grants_read_back_as_written(grants: list[str]) -> None:
    assert [str(parse_grant(g)) for g in grants] == grants


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("owner", "unknown role 'owner'"),
        ("Viewer", "unknown role 'Viewer'"),
        ("operator:", "agent pattern ''"),
        ("operator:acme/*", "agent pattern 'acme/*'"),
        ("operator:a b", "agent pattern 'a b'"),
    ],
)
def test_unknown_roles_and_bad_patterns_are_refused(text: str, says: str) -> None:
    with pytest.raises(GrantInvalid, match=re.escape(says)):
        parse_grant(text)


def test_a_list_of_every_agent_needs_the_role_on_some_agents() -> None:
    scoped = Principal("ann", (parse_grant("viewer:acme.*"), parse_grant("operator")))
    assert authorize_some(scoped, Action.READ_STATUS) is None
    refusal = authorize_some(scoped, Action.ANSWER_APPROVAL)
    assert refusal is not None and refusal.role is Role.APPROVER
    assert str(refusal) == "ann may not approval.answer: it needs role approver on some agent"
    assert refusal.body()["agent_id"] is None
