"""The principals as the ledger's principal stream leaves them: a pure fold of its events.

The stream is the record of every change (who added, rotated, revoked whom, when); the
``principals`` table (``owlclaw.access.table``) holds the same state for per-request lookups,
and is brought up to it from this fold."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

import msgspec

from events import catalog as ev
from owlclaw.access.authorize import BOOTSTRAP, Principal
from owlclaw.access.roles import Grant, parse_grant

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class PrincipalInvalid(ValueError):
    """A change to the principals that cannot be made (bad name, taken, unknown, revoked)."""


class PrincipalRecord(msgspec.Struct, frozen=True):
    """One principal as recorded: grants, its token's digest, whether revoked, and the version
    of the principal stream that last changed it."""

    name: str
    grants: tuple[Grant, ...]
    token_sha256: str
    revoked: bool
    version: int
    added_at: datetime
    added_by: str

    def principal(self) -> Principal:
        return Principal(self.name, self.grants)


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise PrincipalInvalid(
            f"principal name {name!r}: 1-64 letters, digits, '.', '_', '@' or '-',"
            " starting with a letter or digit"
        )
    if name == BOOTSTRAP:
        raise PrincipalInvalid(f"{BOOTSTRAP!r} is the server token's principal: choose another")


def fold(events: Iterable[ev.LedgerEvent]) -> dict[str, PrincipalRecord]:
    """Name -> record, after the principal stream's ``events`` in version order."""
    found: dict[str, PrincipalRecord] = {}
    for event in events:
        version = event.originator_version
        match event:
            case ev.PrincipalAdded(name=name):
                grants = tuple(parse_grant(g) for g in event.grants)
                found[name] = PrincipalRecord(
                    name, grants, event.token_sha256, False, version, event.timestamp, event.by
                )
            case ev.PrincipalTokenRotated(name=name):
                found[name] = msgspec.structs.replace(
                    found[name], token_sha256=event.token_sha256, version=version
                )
            case ev.PrincipalRevoked(name=name):
                found[name] = msgspec.structs.replace(found[name], revoked=True, version=version)
    return found
