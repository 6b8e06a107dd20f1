"""The OwlClaw PostgreSQL recorder: concurrent writers, gap-free readers, hash-chained rows.

The stock ``eventsourcing.postgres`` recorder takes ``LOCK TABLE ... EXCLUSIVE`` in every write
transaction so that notification ids are committed in id order. That lock is held through the
commit's WAL flush, so all writers in the cluster commit one at a time.

This recorder keeps the guarantee without the table lock:

* An append allocates its notification ids *and* its transaction id inside one short critical
  section (a session advisory lock, released before the insert and the commit). Among ledger
  writers, id order therefore equals transaction-id order.
* Readers only return rows whose transaction id is below the snapshot's ``xmin`` (every
  transaction below ``xmin`` has ended). If a row is returned, every row with a lower id has a
  lower transaction id, so it has ended too: it is either visible or rolled back. Readers can
  never pass over a gap that is filled later.
* ``NOTIFY`` inside the write transaction would serialize commits again (PostgreSQL takes a
  global lock for notifying commits), so wake-ups are sent after commit by a background
  notifier that coalesces them, in a transaction with ``synchronous_commit = off``.

Each row also stores ``prev_hash`` (the hash of the previous event of its stream) and ``hash``
(sha256 over ``prev_hash`` and the row's content), computed by the database in the same
statement, so no writer can forget it. ``events.hashchain`` recomputes the chain.

The same statement refuses a version that does not directly follow the stream's last stored one
(as a unique violation, i.e. a conflict): an aggregate whose earlier append failed has used up
versions that were never stored, and appending past them would leave a hole in its stream.

The append functions' SQL is in ``events.append_sql``, the wake-ups in ``events.notify``, the
connection helpers in ``events.postgres``: this module is the recorder classes and their queries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    StoredEvent,
    Subscription,
    Tracking,
)
from eventsourcing.postgres import (
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresFactory,
    PostgresProcessRecorder,
)
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier
from psycopg.types.json import Jsonb

from events.append_sql import (
    ADVISORY_LOCK_KEY,
    APPEND_FUNCTION,
    APPEND_GROUP_FUNCTION,
    APPEND_ONE_FUNCTION,
    APPEND_ROWS_FUNCTION,
)
from events.group_commit import GroupCommit
from events.hashchain import Row, VerifyReport, select_rows, verify_ledger
from events.ledger_format import LedgerFormat, LedgerTooNew, is_newer, running_format, unreadable
from events.notify import Notifier, WatermarkSubscription
from events.postgres import connect_kwargs, schema_lock

MAX_GROUP = 32
"""Appends per grouped transaction: each runs in a savepoint (a subtransaction), and PostgreSQL
tracks up to 64 of them per transaction cheaply."""


class OwlClawApplicationRecorder(PostgresApplicationRecorder):
    """Application recorder whose writers do not serialize on a table lock."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(self.datastore.schema)
        table = Identifier(self.events_table_name)
        self.sequence_name = f"{self.events_table_name}_seq"[: self.MAX_IDENTIFIER_LEN]
        self.append_function_name = f"{self.events_table_name}_append"[: self.MAX_IDENTIFIER_LEN]
        sequence = Identifier(self.sequence_name)
        names = {
            "schema": schema,
            "table": table,
            "sequence": sequence,
            "function": Identifier(self.append_function_name),
            "one": Identifier(f"{self.append_function_name}_1"[: self.MAX_IDENTIFIER_LEN]),
            "rows": Identifier(f"{self.append_function_name}_rows"[: self.MAX_IDENTIFIER_LEN]),
            "group": Identifier(f"{self.append_function_name}_group"[: self.MAX_IDENTIFIER_LEN]),
            "event_type": Identifier(self.stored_event_type_name),
        }
        self.sql_create_statements[self.create_table_statement_index] = SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
            "originator_id uuid NOT NULL, "
            "originator_version bigint NOT NULL, "
            "topic text NOT NULL, "
            "state bytea NOT NULL, "
            "notification_id bigint NOT NULL, "
            "transaction_id xid8 NOT NULL, "
            "prev_hash bytea NOT NULL, "
            "hash bytea NOT NULL, "
            "PRIMARY KEY (originator_id, originator_version))"
        ).format(**names)
        self.sql_create_statements.insert(
            self.create_table_statement_index,
            SQL("CREATE SEQUENCE IF NOT EXISTS {schema}.{sequence}").format(**names),
        )
        self.create_insert_function_statement_index += 1
        self.sql_create_statements[self.create_insert_function_statement_index] = SQL(
            APPEND_ROWS_FUNCTION
        ).format(**names)
        for function in (APPEND_FUNCTION, APPEND_ONE_FUNCTION, APPEND_GROUP_FUNCTION):
            self.sql_create_statements.append(
                SQL(function).format(lock_key=ADVISORY_LOCK_KEY, **names)
            )
        self.blobs_table_name = f"{self.events_table_name.removesuffix('_events')}_blobs"
        blobs = {"schema": schema, "blobs": Identifier(self.blobs_table_name)}
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{blobs} ("
                "sha256 text PRIMARY KEY, media_type text NOT NULL, data bytea NOT NULL)"
            ).format(**blobs)
        )
        self.sql_insert_blob = SQL(
            "INSERT INTO {schema}.{blobs} (sha256, media_type, data) VALUES (%s, %s, %b) "
            "ON CONFLICT (sha256) DO NOTHING"
        ).format(**blobs)
        self.sql_select_blob = SQL(
            "SELECT media_type, data FROM {schema}.{blobs} WHERE sha256 = %s"
        ).format(**blobs)
        self.sql_append = SQL(
            "SELECT {schema}.{function}(%s::uuid[], %s::bigint[], %s::text[], %b::bytea[]) AS id"
        ).format(**names)
        # One event (the common case) as scalars: psycopg dumps arrays at a noticeable cost.
        self.sql_append_one = SQL(
            "SELECT {schema}.{one}(%s::uuid, %s::bigint, %s::text, %b::bytea) AS id"
        ).format(**names)
        self.sql_append_group = SQL(
            "SELECT id, error FROM {schema}.{group}"
            "(%s::int[], %s::uuid[], %s::bigint[], %s::text[], %b::bytea[])"
        ).format(**names)
        self.max_notification_id_statement = SQL(
            "SELECT max(notification_id) FROM {schema}.{table} "
            "WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())"
        ).format(**names)
        self.sql_max_committed = SQL("SELECT max(notification_id) FROM {schema}.{table}").format(
            **names
        )
        self.sql_held_back = SQL(
            "SELECT EXISTS (SELECT 1 FROM {schema}.{table} WHERE notification_id > %s "
            "AND transaction_id >= pg_snapshot_xmin(pg_current_snapshot())) AS held"
        ).format(**names)
        self.format_table_name = f"{self.events_table_name}_format"[: self.MAX_IDENTIFIER_LEN]
        self._notifier = Notifier(self.datastore, self.channel_name)
        self._group: GroupCommit[Sequence[StoredEvent], list[int]] = GroupCommit(
            self.append_group, max_group=MAX_GROUP
        )

    def create_table(self) -> None:
        """Create the tables and append functions, after checking the ledger's recorded format
        (``events.ledger_format``): a ledger a newer OwlClaw wrote is refused (LedgerTooNew, this
        recorder's connections closed) before anything of it is created or replaced."""
        with schema_lock(self.datastore):
            running = running_format()
            recorded = self.recorded_format()
            if recorded is not None and unreadable(recorded, running):
                self.datastore.close()
                raise LedgerTooNew(recorded, running)
            super().create_table()
            if recorded is None or is_newer(running, recorded):
                self.record_format(running)

    def recorded_format(self) -> LedgerFormat | None:
        """The format the ledger's newest writer recorded (None: none was, a new ledger)."""
        table = self._format_table()
        with self.datastore.transaction() as curs:
            curs.execute("SELECT to_regclass(%s) AS t", (table.as_string(curs),))
            row = curs.fetchone()
            if row is None or row["t"] is None:
                return None
            curs.execute(SQL("SELECT format, events, owlclaw FROM {}").format(table))
            row = curs.fetchone()
        return None if row is None else LedgerFormat(**row)

    def record_format(self, written: LedgerFormat) -> None:
        """Record the format the ledger is written in from now on (one row, replaced)."""
        table = self._format_table()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {} ("
                    "one boolean PRIMARY KEY DEFAULT true CHECK (one), "
                    "format integer NOT NULL, "
                    "events jsonb NOT NULL, "
                    "owlclaw text NOT NULL, "
                    "recorded_at timestamptz NOT NULL DEFAULT now())"
                ).format(table)
            )
            curs.execute(
                SQL(
                    "INSERT INTO {} (format, events, owlclaw) VALUES (%s, %s, %s) "
                    "ON CONFLICT (one) DO UPDATE SET format = excluded.format,"
                    " events = excluded.events, owlclaw = excluded.owlclaw, recorded_at = now()"
                ).format(table),
                (written.format, Jsonb(written.events), written.owlclaw),
            )

    def _format_table(self) -> Identifier:
        return Identifier(self.datastore.schema, self.format_table_name)

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        # Not retried: after a lost connection the commit's outcome is unknown, and the caller
        # (the ledger) decides what that means, instead of a blind re-insert.
        if kwargs.get("tracking") is None:
            ids = self._group.submit(stored_events)
        else:
            with (
                self.datastore.get_connection() as conn,
                conn.pipeline(),
                conn.transaction(),
                conn.cursor(binary=True) as curs,
            ):
                ids = self._append(curs, stored_events)
                self._insert_events(curs, stored_events, **kwargs)
        if ids:
            self._notifier.poke()
        return ids

    def append_group(
        self, appends: Sequence[Sequence[StoredEvent]]
    ) -> list[list[int] | BaseException]:
        """Commit ``appends`` in one transaction: each append's notification ids, or the
        IntegrityError of an append that conflicts (rolled back alone, in a savepoint, while the
        others commit). ``insert_events`` groups the appends of concurrent callers through it."""
        # Binary protocol: uuid/bytea/bigint arrays are sent without text formatting.
        with self.datastore.get_connection() as conn, conn.cursor(binary=True) as curs:
            if len(appends) == 1:
                # One statement in autocommit mode is its own transaction: one round trip.
                try:
                    return [self._append(curs, appends[0])]
                except IntegrityError as e:
                    return [e]
            events = [e for append in appends for e in append]
            curs.execute(
                self.sql_append_group,
                (
                    [len(append) for append in appends],
                    [e.originator_id for e in events],
                    [e.originator_version for e in events],
                    [e.topic for e in events],
                    [e.state for e in events],
                ),
                prepare=True,
            )
            rows = curs.fetchall()
        outcomes: list[list[int] | BaseException] = []
        start = 0
        for append in appends:
            mine = rows[start : start + len(append)]
            start += len(append)
            error = mine[0]["error"] if mine else None
            if error:
                at = ", ".join(f"{e.originator_id}@{e.originator_version}" for e in append)
                outcomes.append(IntegrityError(f"{error} (appending {at})"))
            else:
                outcomes.append([r["id"] for r in mine])
        return outcomes

    def _append(self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent]) -> list[int]:
        if not stored_events:
            return []
        params: tuple[Any, ...]
        if len(stored_events) == 1:
            e = stored_events[0]
            statement = self.sql_append_one
            params = (e.originator_id, e.originator_version, e.topic, e.state)
        else:
            statement = self.sql_append
            params = (
                [e.originator_id for e in stored_events],
                [e.originator_version for e in stored_events],
                [e.topic for e in stored_events],
                [e.state for e in stored_events],
            )
        try:
            curs.execute(statement, params, prepare=True)
        except psycopg.errors.UniqueViolation as e:
            raise IntegrityError(str(e)) from e
        return [row["id"] for row in curs.fetchall()]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        clauses: list[Composed | SQL] = [
            SQL("transaction_id < pg_snapshot_xmin(pg_current_snapshot())")
        ]
        params: list[Any] = []
        if start is not None:
            clauses.append(
                SQL("notification_id >= %s" if inclusive_of_start else "notification_id > %s")
            )
            params.append(start)
        if stop is not None:
            clauses.append(SQL("notification_id <= %s"))
            params.append(stop)
        if topics:
            clauses.append(SQL("topic = ANY(%s)"))
            params.append(list(topics))
        params.append(limit)
        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE {where} ORDER BY notification_id LIMIT %s"
        ).format(
            schema=Identifier(self.datastore.schema),
            table=Identifier(self.events_table_name),
            where=SQL(" AND ").join(clauses),
        )
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, params, prepare=True)
            return [
                Notification(
                    id=row["notification_id"],
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]

    def select_stream_notifications(
        self, originator_ids: Sequence[UUID], after: int = 0, limit: int | None = None
    ) -> list[Notification]:
        """The events of the given streams after log position ``after`` (at most ``limit``), in
        global log order."""
        statement = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE originator_id = ANY(%s) AND notification_id > %s"
            " ORDER BY notification_id LIMIT %s"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, (list(originator_ids), after, limit))
            return [
                Notification(
                    id=row["notification_id"],
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]

    def has_event_once(self, originator_id: UUID, originator_version: int) -> bool | None:
        """Whether the event is stored; one quick try outside the pool (None: can't tell)."""
        statement = SQL(
            "SELECT 1 FROM {schema}.{table} WHERE originator_id = %s AND originator_version = %s"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        try:
            with psycopg.connect(**connect_kwargs(self.datastore), connect_timeout=2) as conn:
                return (
                    conn.execute(statement, (originator_id, originator_version)).fetchone()
                    is not None
                )
        except psycopg.Error:
            return None

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def max_committed_notification_id(self) -> int | None:
        """The highest notification id committed, also when the watermark still holds it back."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.sql_max_committed)
            row = curs.fetchone()
            return row["max"] if row else None

    def is_held_back(self, after: int) -> bool:
        """True while committed rows above ``after`` wait for an older transaction to end."""
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self.sql_held_back, (after,), prepare=True)
            row = curs.fetchone()
            return bool(row and row["held"])

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[PostgresApplicationRecorder]:
        return WatermarkSubscription(recorder=self, gt=gt, topics=topics)

    def stream_heads(self, streams: Sequence[UUID] | None = None) -> dict[UUID, tuple[int, bytes]]:
        """Stream -> (last version, its hash), of every stream or of ``streams`` (a stream
        without events is absent). A given stream's head is one backward step of the primary
        key, however long the stream: an agent's stream grows with every run it makes."""
        names = {
            "schema": Identifier(self.datastore.schema),
            "table": Identifier(self.events_table_name),
        }
        if streams is None:
            statement = SQL(
                "SELECT DISTINCT ON (originator_id) originator_id, originator_version, hash "
                "FROM {schema}.{table} ORDER BY originator_id, originator_version DESC"
            ).format(**names)
        else:
            statement = SQL(
                "SELECT s.id AS originator_id, h.originator_version, h.hash "
                "FROM unnest(%s::uuid[]) AS s(id) CROSS JOIN LATERAL ("
                "SELECT originator_version, hash FROM {schema}.{table} "
                "WHERE originator_id = s.id ORDER BY originator_version DESC LIMIT 1) AS h"
            ).format(**names)
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, (list(streams),) if streams is not None else None)
            return {
                row["originator_id"]: (row["originator_version"], bytes(row["hash"]))
                for row in curs.fetchall()
            }

    def event_hashes(self, keys: Sequence[tuple[UUID, int]]) -> dict[tuple[UUID, int], bytes]:
        """(stream, version) -> the stored event's hash, for those of ``keys`` that are stored."""
        statement = SQL(
            "SELECT t.originator_id, t.originator_version, t.hash FROM {schema}.{table} t "
            "JOIN unnest(%s::uuid[], %s::bigint[]) AS k(id, v) "
            "ON t.originator_id = k.id AND t.originator_version = k.v"
        ).format(schema=Identifier(self.datastore.schema), table=Identifier(self.events_table_name))
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, ([k[0] for k in keys], [k[1] for k in keys]))
            return {
                (row["originator_id"], row["originator_version"]): bytes(row["hash"])
                for row in curs.fetchall()
            }

    def delete_streams(self, heads: Mapping[UUID, tuple[int, bytes]]) -> int:
        """Delete the rows of the streams in ``heads`` in one transaction, if each still ends
        at its given (version, hash) or is gone already: an archive deletes only what it holds.
        How many rows went; a stream that ends elsewhere raises IntegrityError naming it, and
        nothing is deleted."""
        names = {
            "schema": Identifier(self.datastore.schema),
            "table": Identifier(self.events_table_name),
        }
        streams = list(heads)
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "SELECT DISTINCT ON (originator_id) originator_id, originator_version, hash "
                    "FROM {schema}.{table} WHERE originator_id = ANY(%s) "
                    "ORDER BY originator_id, originator_version DESC"
                ).format(**names),
                (streams,),
            )
            for row in curs.fetchall():
                found = (row["originator_version"], bytes(row["hash"]))
                if found != heads[row["originator_id"]]:
                    raise IntegrityError(
                        f"stream {row['originator_id']} ends at version {found[0]} hash "
                        f"{found[1].hex()}, not at the archived {heads[row['originator_id']][0]}"
                    )
            curs.execute(
                SQL("DELETE FROM {schema}.{table} WHERE originator_id = ANY(%s)").format(**names),
                (streams,),
            )
            return curs.rowcount

    def insert_blob(self, sha256: str, media_type: str, data: bytes) -> None:
        """Store ``data`` under ``sha256`` unless a blob is stored there already."""
        with self.datastore.get_connection() as conn:
            conn.execute(self.sql_insert_blob, (sha256, media_type, data))

    def select_blob(self, sha256: str) -> tuple[str, bytes] | None:
        """The media type and bytes stored under ``sha256``, None if there are none."""
        with self.datastore.get_connection() as conn:
            row = conn.execute(self.sql_select_blob, (sha256,)).fetchone()
        return (row["media_type"], bytes(row["data"])) if row else None

    def verify_chains(self, streams: Sequence[UUID] | None = None) -> VerifyReport:
        """Recompute the hash chains the append function stored (every stream or ``streams``)."""
        return verify_ledger(self._conninfo(), streams, self.events_table_name)

    def chain_rows(self, streams: Sequence[UUID]) -> Iterator[Row]:
        """The stored events of ``streams`` with their hashes, stream by stream in the order
        given, each by version (streamed)."""
        return select_rows(self._conninfo(), streams, self.events_table_name)

    def _conninfo(self) -> str:
        return make_conninfo("", **connect_kwargs(self.datastore))

    def close_notifier(self) -> None:
        self._notifier.close()


class OwlClawProcessRecorder(PostgresProcessRecorder, OwlClawApplicationRecorder):
    """Process recorder: events and the upstream tracking position in one transaction.

    The append runs first so that the transaction id is assigned inside the append's critical
    section (the invariant readers rely on); the tracking row follows.
    """

    def _insert_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is not None:
            try:
                self._insert_tracking(curs, tracking=tracking)
            except psycopg.errors.UniqueViolation as e:
                raise IntegrityError(str(e)) from e


class OwlClawFactory(PostgresFactory):
    """eventsourcing infrastructure factory that builds the OwlClaw recorders."""

    application_recorder_class = OwlClawApplicationRecorder
    process_recorder_class = OwlClawProcessRecorder
