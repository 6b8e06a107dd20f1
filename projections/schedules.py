"""Schedules view: every schedule an agent requested, with its next fire time (events.cron, UTC),
last fire and outcome, fires and misfires, and the timer backend that holds it (active =
requested or registered); and each fire, with how late it was recorded."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any, ClassVar

import msgspec
from psycopg import Cursor

from events import catalog as ev
from events.catalog import LedgerEvent
from events.cron import next_fire_if_any
from events.ledger_log import LoggedEvent
from projections.sqlvalues import text
from projections.view import View


def cancel_outcome(e: ev.ScheduleCancelled) -> str:
    """A cancel as the schedule's last outcome: "cancelled by console:alice: why"."""
    who = f" by {e.by}" if e.by else ""
    return f"cancelled{who}: {e.reason}" if e.reason else f"cancelled{who}"


class SchedulesView(View):
    name: ClassVar[str] = "schedules"
    version: ClassVar[int] = 3
    """2: the focus sealed as in the ledger. 3: each schedule's on_missed policy, and a
    TimerMissed counted as the occurrences it records."""
    tables: ClassVar[tuple[str, ...]] = ("schedules", "schedule_agents", "timer_fires")
    indexes: ClassVar[tuple[str, ...]] = ("schedules_agent", "timer_fires_at")
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (
        ev.AgentRegistered,
        ev.ScheduleRequested,
        ev.ScheduleRegistered,
        ev.ScheduleCancelled,
        ev.TimerFired,
        ev.TimerMissed,
    )
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS {schedule_agents} (stream_id uuid PRIMARY KEY,"
        " agent_id text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {schedules} ("
        " schedule_id text PRIMARY KEY, agent_id text NOT NULL, kind text NOT NULL,"
        " focus text NOT NULL, owner_run_id uuid, cron text, delay_seconds integer,"
        " status text NOT NULL, next_fire_at timestamptz, last_fire_at timestamptz,"
        " last_outcome text, fires integer NOT NULL DEFAULT 0, backend text, backend_id text,"
        " requested_at timestamptz NOT NULL, position bigint NOT NULL)",
        "CREATE INDEX IF NOT EXISTS {schedules_agent} ON {schedules} (agent_id, status)",
        # added later: misses before it are counted once the view is rebuilt
        "ALTER TABLE {schedules} ADD COLUMN IF NOT EXISTS misses integer NOT NULL DEFAULT 0",
        # added later too: the fires before it are in it once the view is rebuilt
        "CREATE TABLE IF NOT EXISTS {timer_fires} (schedule_id text NOT NULL,"
        " agent_id text NOT NULL, fire_time timestamptz NOT NULL,"
        " fired_at timestamptz NOT NULL, PRIMARY KEY (schedule_id, fire_time))",
        "CREATE INDEX IF NOT EXISTS {timer_fires_at} ON {timer_fires} (fired_at)",
        "ALTER TABLE {schedules} ADD COLUMN IF NOT EXISTS on_missed text NOT NULL DEFAULT 'one'",
    )

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e, pos = logged.event, logged.position
        if isinstance(e, ev.AgentRegistered):
            curs.execute(
                self.sql("INSERT INTO {schedule_agents} VALUES (%s, %s) ON CONFLICT DO NOTHING"),
                (e.originator_id, text(e.agent_id)),
            )
        elif isinstance(e, ev.ScheduleRequested):
            if e.kind == "cron" and e.cron:
                first = next_fire_if_any(e.cron, e.timestamp)
            else:
                first = e.fire_at or e.timestamp + timedelta(seconds=e.delay_seconds or 0)
            curs.execute(
                self.sql(
                    "INSERT INTO {schedules} (schedule_id, agent_id, kind, focus, owner_run_id,"
                    " cron, delay_seconds, status, next_fire_at, last_outcome, requested_at,"
                    " position, on_missed)"
                    " SELECT %s, a.agent_id, %s, %s, %s, %s, %s, 'requested', %s, %s, %s, %s, %s"
                    " FROM {schedule_agents} a WHERE a.stream_id = %s"
                    " ON CONFLICT (schedule_id) DO NOTHING"
                ),
                (
                    text(e.schedule_id),
                    e.kind,
                    text(self.ledger.sealer.stored(e, "focus")),
                    e.owner_run_id,
                    text(e.cron),
                    e.delay_seconds,
                    first,
                    "never fires" if first is None else None,
                    e.timestamp,
                    pos,
                    e.on_missed,
                    e.originator_id,
                ),
            )
        elif isinstance(e, ev.ScheduleRegistered):
            curs.execute(
                self.sql(
                    "UPDATE {schedules} SET status = CASE WHEN status = 'requested'"
                    " THEN 'registered' ELSE status END, backend = %s, backend_id = %s,"
                    " position = %s WHERE schedule_id = %s"
                ),
                (text(e.backend), text(e.backend_id), pos, text(e.schedule_id)),
            )
        elif isinstance(e, ev.ScheduleCancelled):
            curs.execute(
                self.sql(
                    "UPDATE {schedules} SET status = 'cancelled', next_fire_at = NULL,"
                    " last_outcome = %s, position = %s WHERE schedule_id = %s"
                ),
                (text(cancel_outcome(e)), pos, text(e.schedule_id)),
            )
        elif isinstance(e, ev.TimerFired | ev.TimerMissed):
            self._fired(curs, e, pos)

    def _fired(self, curs: Cursor[Any], e: ev.TimerFired | ev.TimerMissed, pos: int) -> None:
        row = curs.execute(
            self.sql("SELECT kind, cron, agent_id FROM {schedules} WHERE schedule_id = %s"),
            (text(e.schedule_id),),
        ).fetchone()
        if row is None:
            return
        if isinstance(e, ev.TimerFired):
            curs.execute(
                self.sql(
                    "INSERT INTO {timer_fires} VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
                ),
                (text(e.schedule_id), row["agent_id"], e.fire_time, e.timestamp),
            )
        kind, cron = row["kind"], row["cron"]
        outcome = "fired" if isinstance(e, ev.TimerFired) else f"missed: {e.reason}"
        following = next_fire_if_any(cron, e.fire_time) if kind == "cron" and cron else None
        curs.execute(
            self.sql(
                "UPDATE {schedules} SET last_fire_at = %s, last_outcome = %s,"
                " fires = fires + %s, misses = misses + %s, next_fire_at = %s, position = %s,"
                " status = CASE WHEN kind = 'once' THEN 'completed' ELSE status END"
                " WHERE schedule_id = %s AND status <> 'cancelled'"
            ),
            (
                e.fire_time,
                text(outcome),
                1 if isinstance(e, ev.TimerFired) else 0,
                e.occurrences if isinstance(e, ev.TimerMissed) else 0,
                following,
                pos,
                text(e.schedule_id),
            ),
        )

    def next_fires(self, agent_ids: Sequence[str] | None = None) -> dict[str, datetime]:
        """Each agent's next timer (of ``agent_ids``, or every agent's): the earliest fire of
        its active schedules."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, min(next_fire_at) AS at FROM {schedules}"
                    " WHERE status IN ('requested', 'registered') AND next_fire_at IS NOT NULL"
                    " AND (%s::text[] IS NULL OR agent_id = ANY(%s)) GROUP BY agent_id"
                ),
                (agent_ids, agent_ids),
            ).fetchall()
        return {row["agent_id"]: row["at"] for row in rows}

    def listing(self, agent_id: str | None, every: bool) -> list[dict[str, Any]]:
        """An agent's (None: every agent's) active schedules, with ended ones when ``every``:
        schedule_id, agent_id, kind, focus, cron, on_missed, status, next_fire_at,
        last_fire_at, last_outcome, fires, misses, backend; by agent, soonest first. The focus
        is stored sealed and opened here (``[erased]`` once its key is destroyed)."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT schedule_id, agent_id, kind, focus, cron, on_missed, status,"
                    " next_fire_at, last_fire_at, last_outcome, fires, misses, backend"
                    " FROM {schedules}"
                    " WHERE (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
                    " AND (%(every)s OR status IN ('requested', 'registered'))"
                    " ORDER BY agent_id, next_fire_at NULLS LAST"
                ),
                {"agent": agent_id, "every": every},
            ).fetchall()
        return [{**r, "focus": self.ledger.sealer.open(r["focus"])} for r in rows]

    def pending(self) -> int:
        """How many schedules are active (requested or registered)."""
        with self.transaction(commit=False) as curs:
            row = curs.execute(
                self.sql(
                    "SELECT count(*) AS n FROM {schedules}"
                    " WHERE status IN ('requested', 'registered')"
                )
            ).fetchone()
        return int(row["n"]) if row else 0

    def lateness(self, since: datetime) -> list[DayOfFires]:
        """Per UTC day since ``since``, how many timers fired and how late their TimerFired was
        recorded after the due time (as the ``owlclaw_timer_fire_lateness_seconds`` metric)."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT day, count(*) AS fires,"
                    " percentile_cont(0.5) WITHIN GROUP (ORDER BY late) AS median_s,"
                    " max(late) AS max_s FROM (SELECT (fired_at AT TIME ZONE 'UTC')::date AS day,"
                    " greatest(0, extract(epoch FROM fired_at - fire_time))::float8 AS late"
                    " FROM {timer_fires} WHERE fired_at >= %s) fires GROUP BY day ORDER BY day"
                ),
                (since,),
            ).fetchall()
        return [msgspec.convert(row, DayOfFires) for row in rows]


class DayOfFires(msgspec.Struct, frozen=True):
    day: date
    fires: int
    median_s: float
    max_s: float
