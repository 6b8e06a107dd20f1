"""The timer service's process manager: every requested schedule becomes a timer registered
with the configured backend (a row here, and the backend's id), every cancellation removes it.

It is a projection (rows and tracking position commit together), so a schedule is registered
exactly once per row even across crashes. The built-in backend fires from these rows; an
external backend (Hatchet) holds its own timer and the row keeps its id for cancellation. A
backend that is unreachable degrades to the built-in one: the schedule is never lost.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol

from psycopg import Cursor
from psycopg.rows import DictRow

from events import Ledger
from events import catalog as ev
from events.catalog import LedgerEvent
from events.cron import next_fire, next_fire_if_any
from events.ledger_log import LoggedEvent
from owlclaw.messages import Fire
from projections.sqlvalues import text
from projections.view import View

log = logging.getLogger(__name__)
BUILTIN = "builtin"


class TimerBackend(Protocol):
    """Where timers live: the built-in Postgres rows or an external scheduler (Hatchet)."""

    name: str

    def holds(self, row: dict[str, Any], now: datetime) -> bool:
        """Whether this backend fires the timer on time; one it does not hold stays built-in."""

    def register(self, row: dict[str, Any]) -> str:
        """Create the timer; returns the backend's id for it."""

    def cancel(self, backend_id: str, kind: str) -> None:
        """Delete the timer (a fire that still arrives is deduplicated by the agent)."""


class BuiltinBackend:
    """Timers are the rows themselves; the TimerWorker fires them."""

    name = BUILTIN

    def holds(self, row: dict[str, Any], now: datetime) -> bool:
        return True

    def register(self, row: dict[str, Any]) -> str:
        return str(row["schedule_id"])

    def cancel(self, backend_id: str, kind: str) -> None:
        """Nothing outside the row to remove."""


class TimerRegistrations(View):
    """The process manager that turns schedules into timer registrations with the configured
    backend (and cancellations into their removal).

    A projection for its exactly-once bookkeeping, not a read model: the timer service runs it
    beside the views (``owlclaw.compose.write.start_timers``), never among them. Its name
    (``timers``) is its tracking name and the prefix of its table. Its ``misfire`` column holds
    the schedule's on_missed policy (rows written before it was named so hold the old names,
    read through ``fires.on_missed_of``)."""

    name: ClassVar[str] = "timers"
    tables: ClassVar[tuple[str, ...]] = ("timers",)
    indexes: ClassVar[tuple[str, ...]] = ("timers_due",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (ev.ScheduleRequested, ev.ScheduleCancelled)
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {timers} ("
        " schedule_id text PRIMARY KEY, agent_id text NOT NULL, kind text NOT NULL,"
        " focus text NOT NULL, cron text, next_fire_at timestamptz NOT NULL,"
        " misfire text NOT NULL, catch_up_window_s integer NOT NULL,"
        " backend text NOT NULL, backend_id text NOT NULL,"
        " leased_until timestamptz, attempts integer NOT NULL DEFAULT 0)",
        "CREATE INDEX IF NOT EXISTS {timers_due} ON {timers} (next_fire_at)"
        " WHERE backend = 'builtin'",
    )

    def __init__(
        self,
        ledger: Ledger,
        *,
        rebuilding: bool = False,
        backend: TimerBackend | None = None,
        records: bool = True,
        served: Collection[str] | None = None,
    ):
        self.backend: TimerBackend = backend or BuiltinBackend()
        self.records = records
        """Whether ScheduleRegistered is recorded in the ledger after each batch."""
        self.served = None if served is None else sorted(served)
        """The agents whose timers this service fires (None: every agent). The others' timers
        stay built-in rows that no worker here claims, for the server that serves them."""
        self._serving = None if served is None else frozenset(served)
        self._registered: list[tuple[str, str, str, str]] = []
        super().__init__(ledger, rebuilding=rebuilding)

    def serves(self, agent_id: str) -> bool:
        """Whether this service fires the agent's timers (delivers them, activates it)."""
        return self._serving is None or agent_id in self._serving

    def prepare(self, batch: list[LoggedEvent]) -> None:
        self._registered = []  # those of an attempt that rolled back were never stored

    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        e = logged.event
        if isinstance(e, ev.ScheduleRequested):
            self._register(curs, e)
        elif isinstance(e, ev.ScheduleCancelled):
            row = curs.execute(
                self.sql("DELETE FROM {timers} WHERE schedule_id = %s RETURNING *"),
                (text(e.schedule_id),),
            ).fetchone()
            if row is not None and row["backend"] != BUILTIN:
                try:
                    self.backend.cancel(row["backend_id"], row["kind"])
                except Exception as error:  # the agent deduplicates any fire that still comes
                    log.warning(
                        "could not cancel %s in %s: %s", e.schedule_id, row["backend"], error
                    )

    def _register(self, curs: Cursor[DictRow], e: ev.ScheduleRequested) -> None:
        """Create the timer; a cron expression that never fires gets none (it would never be
        due), only a warning."""
        if e.kind == "cron" and e.cron:
            first = next_fire_if_any(e.cron, e.timestamp)
            if first is None:
                log.warning("schedule %s: cron %r never fires, no timer", e.schedule_id, e.cron)
                return
        else:
            first = e.fire_at or e.timestamp + timedelta(seconds=e.delay_seconds or 0)
        row: dict[str, Any] = {
            "schedule_id": text(e.schedule_id),
            "agent_id": text(e.agent_id),
            "kind": e.kind,
            "focus": text(self.ledger.sealer.stored(e, "focus")),
            "cron": text(e.cron),
            "next_fire_at": first,
            "misfire": e.on_missed,
            "catch_up_window_s": e.catch_up_window_s,
        }
        backend = self.backend if self._holds(row, datetime.now(UTC)) else BuiltinBackend()
        try:
            backend_id = backend.register(row)
        except Exception as error:
            log.warning(
                "%s refused schedule %s, kept in builtin: %s",
                backend.name,
                e.schedule_id,
                str(error).splitlines()[0],
            )
            backend = BuiltinBackend()
            backend_id = backend.register(row)
        curs.execute(
            self.sql(
                "INSERT INTO {timers} (schedule_id, agent_id, kind, focus, cron, next_fire_at,"
                " misfire, catch_up_window_s, backend, backend_id) VALUES (%(schedule_id)s,"
                " %(agent_id)s, %(kind)s, %(focus)s, %(cron)s, %(next_fire_at)s, %(misfire)s,"
                " %(catch_up_window_s)s, %(backend)s, %(backend_id)s)"
                " ON CONFLICT (schedule_id) DO NOTHING"
            ),
            {**row, "backend": backend.name, "backend_id": backend_id},
        )
        self._registered.append((row["agent_id"], row["schedule_id"], backend.name, backend_id))

    def committed(self, batch: list[LoggedEvent]) -> None:
        registered, self._registered = self._registered, []
        if not self.records:
            return
        for agent_id, schedule_id, backend, backend_id in registered:
            agent = self.ledger.load_agent(agent_id)
            if schedule_id not in agent.state.schedules:
                continue  # cancelled or fired meanwhile
            agent.record(
                ev.ScheduleRegistered,
                schedule_id=schedule_id,
                backend=backend,
                backend_id=backend_id,
            )
            self.ledger.append_rebasing(agent)

    def adopt(self) -> int:
        """Move every timer held by another backend to this one: the configuration switched, or
        a schedule went to the built-in backend while this one was unreachable. A timer that
        cannot be moved stays where it is (and still fires), as does one this backend would not
        fire on time (``holds``). Returns how many moved."""
        moved = 0
        now = datetime.now(UTC)
        with self.transaction(commit=True) as curs:
            rows = curs.execute(
                self.sql("SELECT * FROM {timers} WHERE backend <> %s FOR UPDATE"),
                (self.backend.name,),
            ).fetchall()
            for row in rows:
                if row["kind"] == "cron" and self.backend.name == BUILTIN:
                    row["next_fire_at"] = next_fire(row["cron"], now)
                if not self._holds(row, now):
                    continue
                try:
                    backend_id = self.backend.register(row)
                except Exception as error:
                    log.warning("%s stays in %s: %s", row["schedule_id"], row["backend"], error)
                    continue
                curs.execute(
                    self.sql(
                        "UPDATE {timers} SET backend = %s, backend_id = %s, next_fire_at = %s,"
                        " leased_until = NULL WHERE schedule_id = %s"
                    ),
                    (self.backend.name, backend_id, row["next_fire_at"], row["schedule_id"]),
                )
                self._registered.append(
                    (row["agent_id"], row["schedule_id"], self.backend.name, backend_id)
                )
                moved += 1
        self.committed([])
        return moved

    def hand_back(self, fire: Fire) -> bool:
        """Give a fire of an agent not served here (from an engine that holds its timer) back
        to the built-in rows, due at its fire time, for the server that serves the agent: it
        fires it from there (and moves the timer to its own backend when it starts, ``adopt``).
        False for a served agent's fire, which is delivered here."""
        if self.serves(fire.agent_id):
            return False
        with self.transaction(commit=True) as curs:
            row = curs.execute(
                self.sql("SELECT * FROM {timers} WHERE schedule_id = %s FOR UPDATE"),
                (fire.schedule_id,),
            ).fetchone()
            if row is None or row["backend"] == BUILTIN:
                return True  # cancelled, or handed back by an earlier delivery of this fire
            curs.execute(
                self.sql(
                    "UPDATE {timers} SET backend = %s, backend_id = schedule_id,"
                    " next_fire_at = %s, leased_until = NULL, attempts = 0"
                    " WHERE schedule_id = %s"
                ),
                (BUILTIN, fire.fire_time, fire.schedule_id),
            )
        log.warning("fire %s: agent %s is not served here, handed back", fire.key, fire.agent_id)
        try:
            self.backend.cancel(row["backend_id"], row["kind"])
        except Exception as error:  # the agent deduplicates any fire that still comes
            log.warning("could not cancel %s in %s: %s", fire.schedule_id, row["backend"], error)
        self._registered.append((fire.agent_id, fire.schedule_id, BUILTIN, fire.schedule_id))
        self.committed([])
        return True

    def _holds(self, row: dict[str, Any], now: datetime) -> bool:
        """Whether the backend gets the timer: never one of an agent not served here, which
        any other service's engine could then fire to this one."""
        return self.serves(row["agent_id"]) and self.backend.holds(row, now)

    def claim(self, now: datetime, lease: timedelta, limit: int) -> list[dict[str, Any]]:
        """Claim the served agents' built-in timers due at ``now`` (any number of workers:
        SKIP LOCKED + lease)."""
        with self.transaction(commit=True) as curs:
            return curs.execute(
                self.sql(
                    "UPDATE {timers} t SET leased_until = %(until)s, attempts = t.attempts + 1"
                    " FROM (SELECT schedule_id FROM {timers} WHERE backend = 'builtin'"
                    "   AND next_fire_at <= %(now)s"
                    "   AND (leased_until IS NULL OR leased_until < %(now)s)"
                    "   AND (%(served)s::text[] IS NULL OR agent_id = ANY(%(served)s::text[]))"
                    "   ORDER BY next_fire_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) d"
                    " WHERE t.schedule_id = d.schedule_id RETURNING t.*"
                ),
                {"now": now, "until": now + lease, "limit": limit, "served": self.served},
            ).fetchall()

    def release(self, schedule_id: str, leased_until: datetime, retry_at: datetime) -> None:
        """Give back a claim (the one leased until ``leased_until``): due again at
        ``retry_at``. A claim that is no longer that one is left alone."""
        with self.transaction(commit=True) as curs:
            curs.execute(
                self.sql(
                    "UPDATE {timers} SET leased_until = %s"
                    " WHERE schedule_id = %s AND leased_until = %s"
                ),
                (retry_at, schedule_id, leased_until),
            )

    def advance(self, schedule_id: str, next_fire_at: datetime | None) -> None:
        """A claimed timer's fires are delivered: due next at ``next_fire_at`` (a cron
        timer), or gone (None: a one-off)."""
        with self.transaction(commit=True) as curs:
            if next_fire_at is not None:
                curs.execute(
                    self.sql(
                        "UPDATE {timers} SET next_fire_at = %s, leased_until = NULL,"
                        " attempts = 0 WHERE schedule_id = %s"
                    ),
                    (next_fire_at, schedule_id),
                )
            else:
                curs.execute(
                    self.sql("DELETE FROM {timers} WHERE schedule_id = %s"), (schedule_id,)
                )

    def count(self) -> int:
        """How many timers there are (every backend's)."""
        with self.transaction(commit=False) as curs:
            row = curs.execute(self.sql("SELECT count(*) AS n FROM {timers}")).fetchone()
        return int(row["n"]) if row else 0
