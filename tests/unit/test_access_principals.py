"""The principal store on the in-memory ledger: each change an event on the principal stream,
tokens shown once and kept as digests, revoked and rotated tokens refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.streams import PRINCIPALS_STREAM_ID
from owlclaw.access.authorize import BOOTSTRAP, Action, authorize
from owlclaw.access.principals import PrincipalInvalid
from owlclaw.access.roles import Grant, Role, parse_grant
from owlclaw.access.store import PrincipalStore, UnknownPrincipal
from owlclaw.access.tokens import PREFIX, token_sha256


@pytest.fixture
def store() -> PrincipalStore:
    return PrincipalStore(Ledger.in_memory())


def test_a_token_is_shown_once_and_kept_as_its_digest(store: PrincipalStore) -> None:
    record, token = store.add("alice", [parse_grant("operator:acme.*")], by="local:root")
    assert token.startswith(PREFIX)
    assert len(token) > 40
    assert record.token_sha256 == token_sha256(token)
    alice = store.authenticate(token)
    assert alice is not None
    assert alice.name == "alice"
    assert authorize(alice, Action.TRIGGER, "acme.bot") is None
    assert authorize(alice, Action.TRIGGER, "globex.bot") is not None
    (added,) = store._ledger.stream(PRINCIPALS_STREAM_ID)
    assert isinstance(added, ev.PrincipalAdded)
    assert (added.name, added.grants, added.by) == ("alice", ["operator:acme.*"], "local:root")
    assert token not in repr(added)
    assert store.authenticate(token + "x") is None


def test_rotate_and_revoke_end_a_token(store: PrincipalStore) -> None:
    _, old = store.add("bob", [Grant(Role.VIEWER)], by="local:root")
    _, new = store.rotate("bob", by="local:root")
    assert store.authenticate(old) is None
    assert store.authenticate(new) is not None
    store.revoke("bob", by="local:root")
    assert store.authenticate(new) is None
    assert store.records()["bob"].revoked
    with pytest.raises(PrincipalInvalid, match="'bob' is revoked"):
        store.rotate("bob", by="local:root")
    with pytest.raises(PrincipalInvalid, match="exists already"):
        store.add("bob", [Grant(Role.VIEWER)], by="local:root")
    kinds = [type(e) for e in store._ledger.stream(PRINCIPALS_STREAM_ID)]
    assert kinds == [ev.PrincipalAdded, ev.PrincipalTokenRotated, ev.PrincipalRevoked]


@pytest.mark.parametrize(
    ("name", "grants", "says"),
    [
        (BOOTSTRAP, [Grant(Role.ADMIN)], "server token's principal"),
        ("a b", [Grant(Role.ADMIN)], "principal name 'a b'"),
        ("", [Grant(Role.ADMIN)], "principal name ''"),
        ("carol", [], "at least one role"),
    ],
)
def test_bad_additions_are_refused_and_nothing_recorded(
    store: PrincipalStore, name: str, grants: list[Grant], says: str
) -> None:
    with pytest.raises(PrincipalInvalid, match=says):
        store.add(name, grants, by="local:root")
    assert store._ledger.stream(PRINCIPALS_STREAM_ID) == []


def test_unknown_principals_are_refused(store: PrincipalStore) -> None:
    with pytest.raises(UnknownPrincipal, match="no principal 'dave'"):
        store.revoke("dave", by="local:root")
    with pytest.raises(UnknownPrincipal):
        store.rotate("dave", by="local:root")


def test_a_change_checked_on_an_older_state_is_not_recorded(store: PrincipalStore) -> None:
    store.add("erin", [Grant(Role.VIEWER)], by="local:root")
    with pytest.raises(PrincipalInvalid, match="recorded meanwhile"):
        store._record(0, ev.PrincipalRevoked, name="erin", by="local:root")
    assert not store.records()["erin"].revoked


OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["add", "rotate", "revoke"]), st.sampled_from(["a", "b", "c"])),
    max_size=12,
)


@settings(max_examples=50, deadline=None)
@given(operations=OPERATIONS)
def test_only_the_latest_token_of_a_live_principal_authenticates(
    operations: list[tuple[str, str]],
) -> None:
    store = PrincipalStore(Ledger.in_memory())
    tokens: dict[str, list[str]] = {}
    revoked: set[str] = set()
    for operation, name in operations:
        try:
            if operation == "add":
                tokens[name] = [store.add(name, [Grant(Role.VIEWER)], by="t")[1]]
            elif operation == "rotate":
                token = store.rotate(name, by="t")[1]
                tokens[name].append(token)
            else:
                store.revoke(name, by="t")
                revoked.add(name)
        except PrincipalInvalid:
            continue
    for name, issued in tokens.items():
        *old, latest = issued
        assert all(store.authenticate(t) is None for t in old)
        found = store.authenticate(latest)
        assert (found is None) is (name in revoked)
        assert found is None or found.name == name
