"""The principal store: add, rotate, revoke, list and authenticate principals.

Every change is first an event on the ledger's principal stream (hash-chained, appended at the
stream's next version, so two concurrent changes cannot both be recorded on one state), then
the ``principals`` table is brought up to the stream. The in-memory ledger (unit tests) has no
table: there, tokens are looked up in the fold of the stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from events import Ledger, NoDatabase, StreamConflict
from events import catalog as ev
from events.streams import PRINCIPALS_STREAM_ID, now
from owlclaw.access.authorize import Principal
from owlclaw.access.principals import PrincipalInvalid, PrincipalRecord, check_name, fold
from owlclaw.access.roles import Grant
from owlclaw.access.table import PrincipalTable
from owlclaw.access.tokens import new_token, token_sha256


class UnknownPrincipal(PrincipalInvalid):
    """No principal of that name was ever added."""


class PrincipalStore:
    def __init__(self, ledger: Ledger):
        self._ledger = ledger
        try:
            datastore = ledger.database.datastore
        except NoDatabase:
            self._table: PrincipalTable | None = None
        else:
            self._table = PrincipalTable(datastore)

    def records(self) -> dict[str, PrincipalRecord]:
        """Every principal ever added (revoked ones too), by name, in the order added."""
        return self._state()[0]

    def catch_up(self) -> None:
        """Bring the table up to the stream (a server does at start)."""
        if self._table is not None:
            self._table.catch_up(self.records().values())

    def _state(self) -> tuple[dict[str, PrincipalRecord], int]:
        """The principals and the stream version they are as of."""
        events = self._ledger.stream(PRINCIPALS_STREAM_ID)
        return fold(events), len(events)

    def add(self, name: str, grants: Sequence[Grant], by: str) -> tuple[PrincipalRecord, str]:
        """A new principal and its token (shown once: only its digest is kept)."""
        check_name(name)
        if not grants:
            raise PrincipalInvalid(f"give {name!r} at least one role (--role)")
        records, version = self._state()
        if name in records:
            raise PrincipalInvalid(f"principal {name!r} exists already (names are never reused)")
        token = new_token()
        record = self._record(
            version,
            ev.PrincipalAdded,
            name=name,
            grants=[str(g) for g in dict.fromkeys(grants)],
            token_sha256=token_sha256(token),
            by=by,
        )
        return record, token

    def rotate(self, name: str, by: str) -> tuple[PrincipalRecord, str]:
        """A new token for a live principal; the old one stops working."""
        version = self._live(name)
        token = new_token()
        record = self._record(
            version, ev.PrincipalTokenRotated, name=name, token_sha256=token_sha256(token), by=by
        )
        return record, token

    def revoke(self, name: str, by: str) -> PrincipalRecord:
        return self._record(self._live(name), ev.PrincipalRevoked, name=name, by=by)

    def authenticate(self, token: str) -> Principal | None:
        """The live principal holding ``token``, or None."""
        return self.holding(token_sha256(token))

    def holding(self, digest: str) -> Principal | None:
        """The live principal whose token has this sha256 (the console's session keeps the
        digest, never the token), or None."""
        if self._table is not None:
            return self._table.principal(digest)
        for record in self.records().values():
            if record.token_sha256 == digest and not record.revoked:
                return record.principal()
        return None

    def _live(self, name: str) -> int:
        """The stream version on which ``name`` was found live."""
        records, version = self._state()
        record = records.get(name)
        if record is None:
            raise UnknownPrincipal(f"no principal {name!r} (`owlclaw principals list`)")
        if record.revoked:
            raise PrincipalInvalid(f"principal {name!r} is revoked; add a new one instead")
        return version

    def _record(self, seen: int, kind: type[ev.LedgerEvent], **fields: Any) -> PrincipalRecord:
        """Append one change at the version after ``seen`` (the state it was checked on), then
        bring the table up to the stream."""
        event = kind(
            originator_id=PRINCIPALS_STREAM_ID,
            originator_version=seen + 1,
            timestamp=now(),
            **fields,
        )
        try:
            self._ledger.append_events([event])
        except StreamConflict as e:
            raise PrincipalInvalid(
                "another change to the principals was recorded meanwhile; try again"
            ) from e
        records = self.records()
        if self._table is not None:
            self._table.catch_up(records.values())
        return records[fields["name"]]
