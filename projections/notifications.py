"""Outbound notice of each approval request, so a person learns that an agent waits on them.

A view over ApprovalRequested whose ``prepare`` POSTs the request to the configured URL before
the batch's transaction, retrying with exponential backoff and jitter (projections.delivery);
the view's row then records the delivery in the transaction that moves its position past the
event. So a request is delivered at least once: a crash between the POST and the commit sends
it again, and the receiver deduplicates by the ``Idempotency-Key`` header (the approval id). A
request still refused after the last try fails the event, which the runner parks (``owlclaw
projections retry approval_notifications`` sends it again): failures are recorded, never lost.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from psycopg import Cursor

from events import catalog as ev
from events.argument_digest import arguments_digest
from events.catalog import LedgerEvent
from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from projections.delivery import post_json
from projections.sqlvalues import text
from projections.view import View


class ApprovalNotifications(View):
    name: ClassVar[str] = "approval_notifications"
    tables: ClassVar[tuple[str, ...]] = ("approval_notifications",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (ev.ApprovalRequested,)
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {approval_notifications} ("
        " approval_id text PRIMARY KEY, agent_id text NOT NULL, tool text NOT NULL,"
        " http_status integer, not_sent text, sent_at timestamptz, position bigint NOT NULL)",
    )

    def __init__(
        self,
        ledger: Ledger,
        *,
        url: str | None = None,
        timeout_s: float = 10.0,
        attempts: int = 5,
        rebuilding: bool = False,
    ):
        super().__init__(ledger, rebuilding=rebuilding)
        self.url, self.timeout_s, self.attempts = url, timeout_s, attempts
        self._outcomes: dict[str, tuple[int | None, str | None]] = {}

    def prepare(self, batch: list[LoggedEvent]) -> None:
        self._outcomes = {}
        for logged in batch:
            e = logged.event
            if isinstance(e, ev.ApprovalRequested):
                self._outcomes[e.approval_id] = self._notify(e)

    def _notify(self, e: ev.ApprovalRequested) -> tuple[int | None, str | None]:
        """(HTTP status, None) once delivered, or (None, why it was not sent)."""
        if self.url is None:
            return None, "no approvals.notify_url configured"
        if self.rebuilding:
            return None, "a rebuild does not send again"
        if e.expires_at <= datetime.now(UTC):
            return None, "expired before it could be sent"
        body = {
            "approval_id": e.approval_id,
            "agent_id": e.agent_id,
            "run_id": str(e.run_id),
            "kind": e.kind,
            "tool": e.tool,
            "arguments": e.arguments,
            "digest": e.digest or arguments_digest(e.arguments),
            "approvals_required": e.approvals_required,
            "reason": e.reason,
            "approvers": e.approvers,
            "requested_at": e.timestamp.isoformat(),
            "expires_at": e.expires_at.isoformat(),
        }
        delivered = post_json(
            self.url,
            body,
            idempotency_key=e.approval_id,
            timeout_s=self.timeout_s,
            attempts=self.attempts,
        )
        return delivered.status, None

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e = logged.event
        assert isinstance(e, ev.ApprovalRequested)
        status, not_sent = self._outcomes.get(e.approval_id, (None, "not prepared"))
        curs.execute(
            self.sql(
                "INSERT INTO {approval_notifications} (approval_id, agent_id, tool, http_status,"
                " not_sent, sent_at, position) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (approval_id) DO UPDATE SET http_status = excluded.http_status,"
                " not_sent = excluded.not_sent, sent_at = excluded.sent_at"
            ),
            (
                e.approval_id,
                text(e.agent_id),
                text(e.tool),
                status,
                not_sent,
                datetime.now(UTC) if status is not None else None,
                logged.position,
            ),
        )
