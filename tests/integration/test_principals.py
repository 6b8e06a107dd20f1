"""Principals on PostgreSQL: the ``principals`` table kept up to the principal stream, seen by
another process at once, caught up after a change whose table write never happened; and the
``owlclaw principals`` commands as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from events.streams import PRINCIPALS_STREAM_ID, now
from owlclaw.access.authorize import Action, authorize
from owlclaw.access.roles import Grant, Role, parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.access.tokens import new_token, token_sha256
from owlclaw.database import Database
from tests.cli import owlclaw_on

pytestmark = pytest.mark.integration


def test_another_process_sees_each_change_at_once(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as one, Ledger(fresh_db.url) as two:
        writer, server = PrincipalStore(one), PrincipalStore(two)
        _, token = writer.add("alice", [parse_grant("approver:acme.*")], by="local:root")
        alice = server.authenticate(token)
        assert alice is not None
        assert authorize(alice, Action.ANSWER_APPROVAL, "acme.bot") is None
        assert authorize(alice, Action.ANSWER_APPROVAL, "globex.bot") is not None
        _, new = writer.rotate("alice", by="local:root")
        assert server.authenticate(token) is None
        assert server.authenticate(new) is not None
        writer.revoke("alice", by="local:root")
        assert server.authenticate(new) is None
        assert one.chains.verify().ok


def test_a_change_recorded_without_its_row_is_caught_up(fresh_db: Database) -> None:
    """The process died between the event and the table: the next store's catch_up mends it."""
    token = new_token()
    with Ledger(fresh_db.url) as led:
        PrincipalStore(led)  # the table exists, empty
        led.append_events(
            [
                ev.PrincipalAdded(
                    originator_id=PRINCIPALS_STREAM_ID,
                    originator_version=1,
                    timestamp=now(),
                    name="bob",
                    grants=["viewer"],
                    token_sha256=token_sha256(token),
                    by="local:root",
                )
            ]
        )
        store = PrincipalStore(led)
        assert store.authenticate(token) is None
        store.catch_up()
        bob = store.authenticate(token)
        assert bob is not None
        assert bob.grants == (Grant(Role.VIEWER),)


def test_the_principals_commands(fresh_db: Database, tmp_path: Path) -> None:
    added = owlclaw_on(
        fresh_db, "principals", "add", "carol", "--role", "operator:acme.*", "--role", "viewer",
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    shown = json.loads(added.stdout)
    assert shown["roles"] == ["operator:acme.*", "viewer"]
    assert shown["added_by"].startswith("local:")
    with Ledger(fresh_db.url) as led:
        carol = PrincipalStore(led).authenticate(shown["token"])
    assert carol is not None
    assert carol.name == "carol"

    unknown = owlclaw_on(fresh_db, "principals", "add", "dave", "--role", "owner", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "unknown role 'owner'" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    revoked = owlclaw_on(fresh_db, "principals", "revoke", "carol", cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    missing = owlclaw_on(fresh_db, "principals", "rotate", "erin", cwd=tmp_path)
    assert missing.returncode == 3
    assert "no principal 'erin'" in missing.stderr

    listed = owlclaw_on(fresh_db, "principals", "list", "--json", cwd=tmp_path)
    assert [(p["name"], p["revoked"]) for p in json.loads(listed.stdout)] == [("carol", True)]
    with Ledger(fresh_db.url) as led:
        assert PrincipalStore(led).authenticate(shown["token"]) is None
