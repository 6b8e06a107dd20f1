"""The outbox: delivers each MessageSent through its channel, at least once, never lost.

A view over MessageSent whose ``prepare`` delivers the batch's messages before the batch's
transaction (projections.channels: retries with exponential backoff and jitter, the message id
as ``Idempotency-Key``); the view's row then records the delivery in the transaction that moves
its position past the event. A process that dies between the commit of MessageSent and the
send, or between the send and that transaction, sends it again once restarted: the receiver
deduplicates by the key.

A message still undelivered after its channel's last attempt is recorded as
MessageDeliveryFailed on the message's own stream (the agent's and run's streams have one
writer, the agent's runtime), its row says so, and the event is parked in the same transaction:
``owlclaw projections retry outbox`` sends it again. A rebuild sends nothing: it keeps what the
serving table recorded, and parks a message that table never delivered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from events.streams import message_stream_id
from projections import parked as parking
from projections.channels import deliver
from projections.delivery import Undelivered
from projections.sqlvalues import text
from projections.view import View

NOT_DELIVERED_BEFORE_REBUILD = "not delivered before the view was rebuilt"


@dataclass(frozen=True)
class Outcome:
    status: str
    """``delivered``, ``failed`` (every attempt failed) or ``not_sent``."""
    attempts: int
    at: datetime
    http_status: int | None = None
    error: str | None = None


class Outbox(View):
    name: ClassVar[str] = "outbox"
    tables: ClassVar[tuple[str, ...]] = ("outbox",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (ev.MessageSent,)
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {outbox} ("
        " message_id text PRIMARY KEY, agent_id text NOT NULL, run_id uuid NOT NULL,"
        " channel text NOT NULL, status text NOT NULL, attempts integer NOT NULL,"
        " http_status integer, error text, at timestamptz NOT NULL, position bigint NOT NULL)",
    )

    def __init__(self, ledger: Ledger, *, rebuilding: bool = False):
        super().__init__(ledger, rebuilding=rebuilding)
        self._outcomes: dict[str, Outcome] = {}

    def prepare(self, batch: list[LoggedEvent]) -> None:
        messages = [(x.position, x.event) for x in batch if isinstance(x.event, ev.MessageSent)]
        if self.rebuilding:
            self._outcomes = self.outcomes([m.message_id for _, m in messages])
            return
        retried = self._parked([position for position, _ in messages])
        self._outcomes = {m.message_id: self._send(m, p in retried) for p, m in messages}

    def _send(self, message: ev.MessageSent, retry: bool) -> Outcome:
        """Deliver; after the last failed attempt record MessageDeliveryFailed. A retry of a
        parked message that fails again raises, so it stays parked with the new error."""
        try:
            delivered = deliver(message)
        except Undelivered as e:
            self._record_failure(message, e)
            if retry:
                raise
            return Outcome("failed", e.attempts, datetime.now(UTC), error=e.error)
        return Outcome("delivered", delivered.attempts, datetime.now(UTC), delivered.status)

    def _record_failure(self, message: ev.MessageSent, failure: Undelivered) -> None:
        stream = message_stream_id(message.message_id)
        self.ledger.append_events(
            [
                ev.MessageDeliveryFailed(
                    originator_id=stream,
                    originator_version=len(self.ledger.stream(stream)) + 1,
                    timestamp=datetime.now(UTC),
                    message_id=message.message_id,
                    agent_id=message.agent_id,
                    channel=message.channel,
                    attempts=failure.attempts,
                    error=failure.error,
                )
            ]
        )

    def _parked(self, positions: list[int]) -> set[int]:
        """Which of these events are parked: ``retry_parked`` is applying them again."""
        if not positions:
            return set()
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                "SELECT position FROM projection_errors WHERE view_name = %s"
                " AND position = ANY(%s)",
                (self.tracking_name, positions),
            ).fetchall()
        return {r["position"] for r in rows}

    def outcomes(self, message_ids: list[str]) -> dict[str, Outcome]:
        """What the serving table recorded of these messages (a rebuild keeps it rather than
        send again; the console shows it); a message not in it is not delivered yet."""
        if not message_ids:
            return {}
        serving = Identifier(self.tables[0])
        with self.transaction(commit=False) as curs:
            exists = curs.execute("SELECT to_regclass(%s) AS t", (self.tables[0],)).fetchone()
            if exists is None or exists["t"] is None:
                return {}
            rows = curs.execute(
                SQL(
                    "SELECT message_id, status, attempts, http_status, error, at FROM {}"
                    " WHERE message_id = ANY(%s)"
                ).format(serving),
                (message_ids,),
            ).fetchall()
        return {
            r["message_id"]: Outcome(
                r["status"], r["attempts"], r["at"], r["http_status"], r["error"]
            )
            for r in rows
        }

    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        e = logged.event
        assert isinstance(e, ev.MessageSent)
        outcome = self._outcomes.get(e.message_id) or Outcome(
            "not_sent", 0, datetime.now(UTC), error=NOT_DELIVERED_BEFORE_REBUILD
        )
        curs.execute(
            self.sql(
                "INSERT INTO {outbox} (message_id, agent_id, run_id, channel, status, attempts,"
                " http_status, error, at, position) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (message_id) DO UPDATE SET status = excluded.status,"
                " attempts = excluded.attempts, http_status = excluded.http_status,"
                " error = excluded.error, at = excluded.at"
            ),
            (
                e.message_id,
                text(e.agent_id),
                e.run_id,
                text(e.channel),
                outcome.status,
                outcome.attempts,
                outcome.http_status,
                outcome.error,
                outcome.at,
                logged.position,
            ),
        )
        if outcome.status != "delivered":
            failure = Undelivered(outcome.attempts, outcome.error or outcome.status)
            parking.park(curs, self.tracking_name, logged, failure, attempts=1)
