"""``owlclaw bench timers``: fire lateness of both backends and the built-in backend's throughput.

Lateness is a fire's scheduled time to its TimerFired being recorded (the event is committed
with the run's start right after). Each fire starts a real run (scripted model, zero latency).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from events import Ledger
from events import catalog as ev
from events.streams import agent_stream_id
from owlclaw.agents import Agents
from owlclaw.background import load_in_background
from owlclaw.bench import percentiles
from owlclaw.bench.burners import busy_cores
from owlclaw.child_process import stop
from owlclaw.compose.read import open_timer_registrations
from owlclaw.compose.write import place_agents, start_hosts, start_timers
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.environ import overlaid
from owlclaw.llm.providers import litellm_loading
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Fire, FireOutcome, Result, SubmitAndWait
from owlclaw.timers.registrations import BuiltinBackend, TimerRegistrations
from projections import ProjectionRunner

if TYPE_CHECKING:
    from owlclaw.timers.hatchet_engine import HatchetEngine

SCRIPT = "bench-timers"
HOSTS = 4
"""Shared host actors the fires are delivered to, by default (the default placement's on a
machine of 4+ cores)."""
Progress = Callable[[str], None]


def _schedule(ledger: Ledger, fires: list[tuple[str, datetime]]) -> None:
    """Append ScheduleRequested for (agent, fire time) pairs, as the schedule tool records it."""
    by_agent: dict[str, list[datetime]] = {}
    for agent_id, at in fires:
        by_agent.setdefault(agent_id, []).append(at)
    for agent_id, times in by_agent.items():
        agent = ledger.register_agent(agent_id)
        for at in times:
            agent.record(
                ev.ScheduleRequested,
                schedule_id=f"sch_{uuid.uuid4().hex[:12]}",
                kind="once",
                focus="bench",
                agent_id=agent_id,
                delay_seconds=1,
                fire_at=at,
            )
        ledger.append(agent)


def _fired(ledger: Ledger, agents: list[str]) -> list[ev.TimerFired]:
    return [
        e
        for agent_id in agents
        for e in ledger.stream(agent_stream_id(agent_id))
        if isinstance(e, ev.TimerFired)
    ]


def _lateness_ms(fired: list[ev.TimerFired]) -> list[float]:
    return [(e.timestamp - e.fire_time).total_seconds() * 1000 for e in fired]


LOCAL = OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{SCRIPT}",), placement="local"))
"""Agents hosted in this process, playing a one-step script (the throughput's runs)."""


def _local(ledger: Ledger) -> Agents:
    """In-process agents that are never passivated and recall nothing (no embedding model in
    the fires' runs: what is measured is the timers and the runs around them)."""
    register_script(SCRIPT, [{"content": "fired"}])
    return place_agents(ledger, LOCAL, owner=True, idle_s=None, recall=False)


def _config(db: Database, scripts: Path, hosts: int) -> OwlClawConfig:
    """Agents on shared host actors, playing a one-step script (the fire's run)."""
    (scripts / f"{SCRIPT}.json").write_text(json.dumps({"steps": [{"content": "fired"}]}))
    return OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(
            models=(f"scripted/{SCRIPT}",),
            scripts_dir=str(scripts),
            placement="shared",
            hosts=hosts,
        ),
    )


def _wait_fired(
    ledger: Ledger, names: list[str], fires: list[tuple[str, datetime]], timeout_s: float
) -> list[ev.TimerFired]:
    """The agents' TimerFired once all ``fires`` are recorded (or the time is up).

    Nothing is read before the last fire is due: reading the agents' streams every 0.5 s while
    they fired took CPU from the fires being measured, on a machine they keep ~80 % busy.
    """
    time.sleep(max(0.0, (max(at for _, at in fires) - datetime.now(UTC)).total_seconds()))
    deadline = time.monotonic() + timeout_s
    while len(fired := _fired(ledger, names)) < len(fires) and time.monotonic() < deadline:
        time.sleep(0.5)
    return fired


def _runs_ended(ledger: Ledger, names: list[str], timeout_s: float = 120) -> None:
    """Until every run the agents queued is sealed: the fires' runs follow their TimerFired in
    the mailboxes, and those still running would take CPU from the next measurement."""
    deadline = time.monotonic() + timeout_s
    while True:
        streams = [ledger.stream(agent_stream_id(name)) for name in names]
        if all(_runs(events, ev.RunQueued) <= _runs(events, ev.RunSealed) for events in streams):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fires' runs did not end in {timeout_s:g} s")
        time.sleep(0.5)


def _runs(events: list[ev.LedgerEvent], kind: type[ev.RunQueued | ev.RunSealed]) -> set[uuid.UUID]:
    """The run ids of the ``kind`` events among an agent's ``events``."""
    return {e.run_id for e in events if isinstance(e, kind)}


def _warm_names(hosts: int) -> list[str]:
    """One agent name per shared host (placement hashes a name's crc32 onto the pool)."""
    names: dict[int, str] = {}
    i = 0
    while len(names) < hosts:
        name = f"warm-{i}"
        names.setdefault(zlib.crc32(name.encode()) % hosts, name)
        i += 1
    return [names[h] for h in range(hosts)]


def _warm(ledger: Ledger, agents: Agents, hosts: int) -> None:
    """One run on each host before anything is timed: a host imports litellm and prepares its
    statements on its first run, which no fire should pay for."""
    names = _warm_names(hosts)
    for name in names:
        ledger.append(ledger.register_agent(name))

    async def runs() -> None:
        await asyncio.gather(
            *(agents.ask(SubmitAndWait(agent_id=n, trigger="webhook")) for n in names)
        )

    asyncio.run(runs())


def builtin_lateness(
    ledger: Ledger, config: OwlClawConfig, agents: Agents, fires: int, count: int
) -> dict[str, Any]:
    worker, runner = start_timers(ledger, config, BuiltinBackend(), agents.ask)
    start = datetime.now(UTC) + timedelta(seconds=3)
    names = [f"late-{i}" for i in range(count)]
    spacing = timedelta(milliseconds=25)
    planned = [(names[i % count], start + i * spacing) for i in range(fires)]
    _schedule(ledger, planned)
    runner.catch_up()

    async def until_done() -> list[float]:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        fired = await asyncio.to_thread(_wait_fired, ledger, names, planned, 60)
        stop.set()
        await task
        return _lateness_ms(fired)

    lateness = asyncio.run(until_done())
    _runs_ended(ledger, names)
    return {"fires": fires, **percentiles(lateness)}


def builtin_throughput(url: str, pending: int, due: int, agents: int) -> dict[str, Any]:
    with Ledger(url) as ledger:
        local = _local(ledger)
        fired: list[tuple[str, str]] = []

        async def deliver(fire: Fire) -> FireOutcome:
            outcome = await local.ask(fire)
            if outcome.run_id is not None:
                fired.append((fire.agent_id, outcome.run_id))
            return outcome

        # Not adopting: the timers the Hatchet phase left stay Hatchet's; adopted, they would
        # be past-due built-in fires delivered in the timed loop.
        worker, runner = start_timers(
            ledger, LOCAL, BuiltinBackend(), deliver, batch=500, adopt=False
        )
        now = datetime.now(UTC)
        far = now + timedelta(days=7)
        _schedule(ledger, [(f"idle-{i % 100}", far + timedelta(seconds=i)) for i in range(pending)])
        names = [f"busy-{i}" for i in range(agents)]
        soon = now + timedelta(seconds=2)
        _schedule(ledger, [(names[i % agents], soon) for i in range(due)])
        runner.catch_up()
        held = worker.view.count()

        async def deliver_all() -> float:
            await asyncio.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()))
            began = time.perf_counter()
            delivered = 0
            while delivered < due:
                delivered += await worker.tick()
            await asyncio.gather(*(local.ask(Result(agent_id=a, run_id=r)) for a, r in fired))
            elapsed = time.perf_counter() - began
            await local.close()
            return elapsed

        elapsed = asyncio.run(deliver_all())
    return {
        "pending_timers_held": held,
        "due_fires": due,
        "fires_per_second": round(due / elapsed, 1),
        "note": "each fire records TimerFired and runs the agent once (scripted model)",
    }


@contextmanager
def _hatchet_worker(
    engine_env: dict[str, str], config: OwlClawConfig
) -> Iterator[subprocess.Popen[bytes]]:
    """``owlclaw timers hatchet-worker`` delivering to the bench's host actors (same cluster),
    stopped as the block ends (SIGTERM, then waited for)."""
    import ray

    env = {
        **os.environ,
        **engine_env,
        "OWLCLAW_DATABASE_URL": str(config.database_url),
        "OWLCLAW_DATABASE_NAME": config.database_name,
        "OWLCLAW_MODELS": f"scripted/{SCRIPT}",
        "OWLCLAW_SCRIPTS_DIR": str(config.runtime.scripts_dir),
        "OWLCLAW_PLACEMENT": "shared",
        "OWLCLAW_HOSTS": str(config.runtime.hosts),
        "OWLCLAW_RAY_ADDRESS": ray.get_runtime_context().gcs_address,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "timers", "hatchet-worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        stop(process, 30)


def _fire_through(
    ledger: Ledger, view: TimerRegistrations, fires: list[tuple[str, datetime]]
) -> None:
    """Record the fires' schedules and register them with the view's backend."""
    _schedule(ledger, fires)
    ProjectionRunner(ledger, view).catch_up()


class _Engine:
    """The local Hatchet engine on a database of its own on ``server``, started and stopped in
    the background: its start overlaps Ray's, its graceful stop (seconds) the rest of the
    bench's."""

    def __init__(self, server: Database, bin_dir: Path):
        self._server = server
        self._starting = load_in_background(lambda: self._start(bin_dir), "hatchet-start")
        self._stopping: Future[None] | None = None

    def _start(self, bin_dir: Path) -> tuple[HatchetEngine, Database]:
        from owlclaw.timers.hatchet_engine import start_engine

        engine_db = self._server.create_database(f"owlclaw_bench_hatchet_{uuid.uuid4().hex[:6]}")
        try:
            workdir = Path(tempfile.mkdtemp(prefix="hatchet-"))
            return start_engine(engine_db.url, workdir, bin_dir), engine_db
        except BaseException:
            self._server.drop_database(str(engine_db.params["dbname"]))
            raise

    def started(self) -> HatchetEngine:
        return self._starting.result()[0]

    def begin_stop(self) -> None:
        if self._stopping is None:
            self._stopping = load_in_background(self._stop, "hatchet-stop")

    def stopped(self) -> None:
        """Once the engine has stopped (nothing to stop if its start failed)."""
        self.begin_stop()
        assert self._stopping is not None
        self._stopping.result()

    def _stop(self) -> None:
        if self._starting.exception() is None:
            engine, engine_db = self._starting.result()
            engine.stop()
            self._server.drop_database(str(engine_db.params["dbname"]))


def _wait_listening(hatchet: Any, timeout_s: float = 120) -> None:
    """Until the worker has registered the timer task with the engine."""
    from owlclaw.timers.hatchet_backend import TASK

    deadline = time.monotonic() + timeout_s
    while not hatchet.workflows.list(workflow_name=TASK).rows:
        if time.monotonic() > deadline:
            raise RuntimeError("the Hatchet worker did not register its task")
        time.sleep(0.5)


def hatchet_lateness(
    ledger: Ledger,
    hatchet: Any,
    engine: HatchetEngine,
    fires: int,
    count: int,
    progress: Progress,
    restart_fires: int = 40,
) -> dict[str, Any]:
    """Lateness of ``fires`` through the engine and the worker already listening (and after
    a restart of the engine, with ``restart_fires``)."""
    from owlclaw.bench.hatchet_stages import stages
    from owlclaw.timers.hatchet_backend import LEAD, HatchetBackend

    view = open_timer_registrations(ledger, HatchetBackend(hatchet))
    progress(f"Hatchet: registering {fires} one-off schedules…")
    registered = datetime.now(UTC)
    start = registered + LEAD + timedelta(seconds=fires * 0.05)
    names = [f"hatchet-{i}" for i in range(count)]
    spacing = timedelta(milliseconds=50)
    planned = [(names[i % count], start + i * spacing) for i in range(fires)]
    _fire_through(ledger, view, planned)
    progress("Hatchet: waiting for the fires…")
    steady = _wait_fired(ledger, names, planned, 120)
    progress("Hatchet: reading the fires' task runs…")
    result = {
        "lateness": {"fires": fires, **percentiles(_lateness_ms(steady))},
        "stages": stages(hatchet, steady, registered),
    }
    _runs_ended(ledger, names)
    if restart_fires:
        progress("Hatchet: restarting the engine, fires in the minute after…")
        result["after_restart"] = _after_restart(ledger, view, engine, count, restart_fires)
    return result


def _after_restart(
    ledger: Ledger, view: TimerRegistrations, engine: HatchetEngine, count: int, fires: int
) -> dict[str, Any]:
    """Lateness of ``fires`` registered right before the engine restarts and as many
    registered once it is back."""
    from owlclaw.timers.hatchet_backend import LEAD

    before = [f"restart-pending-{i}" for i in range(min(count, fires))]
    first = datetime.now(UTC) + LEAD + timedelta(seconds=10)
    pending = [(before[i % len(before)], first + timedelta(seconds=i)) for i in range(fires)]
    _fire_through(ledger, view, pending)
    began = time.perf_counter()
    engine.restart()
    restart_s = time.perf_counter() - began
    back = datetime.now(UTC)
    after = [f"restart-new-{i}" for i in range(min(count, fires))]
    new = [(after[i % len(after)], back + LEAD + timedelta(seconds=2 + i)) for i in range(fires)]
    _fire_through(ledger, view, new)
    late_pending = _lateness_ms(_wait_fired(ledger, before, pending, 120))
    late_new = _lateness_ms(_wait_fired(ledger, after, new, 120))
    return {
        "restart_s": round(restart_s, 2),
        "fires": len(pending) + len(new),
        **percentiles(late_pending + late_new),
        "registered_before_restart": percentiles(late_pending),
        "registered_after_restart": percentiles(late_new),
    }


METHOD = (
    "Lateness is a fire's scheduled time to its TimerFired being committed by the agent's host"
    " (the fire's run follows in the agent's mailbox; each plays a one-step scripted model)."
    " Agents ({agents}) are hashed onto {hosts} shared Ray host actors started before any fire."
    " Built-in: {fires} one-off fires 25 ms apart, delivered by a TimerWorker in this process."
    " Hatchet: the local engine (hatchet-engine + hatchet-api, v0.104.7) on this PostgreSQL,"
    " `owlclaw timers hatchet-worker` as its own process delivering to the same hosts;"
    " {fires} one-off fires 50 ms apart, registered at least {lead} s ahead (LEAD); the engine"
    " triggers each {early} s before its fire time (EARLY) and the task waits for it, the agent"
    " made ready (activated on its host) meanwhile."
    " After restart (not measured with 0 restart fires): {restart_fires} fires due 1 s apart"
    " from {lead_10} s after their registration, right before `restart()` (SIGTERM, the engine"
    " cleans up, started again on the same database and ports), and {restart_fires} registered"
    " once it is back, due 1 s apart from {lead_2} s after; their lateness together, then per"
    " group. Stages: the {fires} fires' lateness split by their task runs' created and started"
    " times as the engine lists them; the slack is how long before the fire time its task had"
    " started."
    " The engine starts with Ray and the hosts, its worker while the hosts warm up: both are"
    " up, idle, while the built-in backend is measured. Each measurement starts once the runs"
    " of the fires before it have ended."
    " Throughput: in-process agents, one TimerWorker."
    " Each host runs once before any fire (its first run loads litellm). With a background"
    " load, that many burner processes (a tight Python loop each) run the whole time."
)


def run(
    server: Database,
    db: Database,
    *,
    fires: int = 200,
    pending: int = 10_000,
    hatchet_bin: Path | None = None,
    background_load: int = 0,
    progress: Progress = lambda _: None,
    restart_fires: int = 40,
    due: int = 1000,
    hosts: int = HOSTS,
) -> dict[str, Any]:
    """The figures, measured with ``background_load`` cores kept busy (``busy_cores``): a
    machine made slower, as timers meet on a loaded or smaller one."""
    with busy_cores(background_load):
        result = _run(server, db, fires, pending, hatchet_bin, progress, restart_fires, due, hosts)
    return {"background_load_cores": background_load, **result}


def _run(
    server: Database,
    db: Database,
    fires: int,
    pending: int,
    hatchet_bin: Path | None,
    progress: Progress,
    restart_fires: int,
    due: int,
    hosts: int,
) -> dict[str, Any]:
    from owlclaw.timers.hatchet_backend import EARLY, LEAD

    count = 20

    lead = int(LEAD.total_seconds())
    method = METHOD.format(
        agents=count,
        fires=fires,
        hosts=hosts,
        lead=lead,
        early=int(EARLY.total_seconds()),
        lead_2=lead + 2,
        lead_10=lead + 10,
        restart_fires=restart_fires,
    )
    result: dict[str, Any] = {"method": method}
    with tempfile.TemporaryDirectory() as scripts, contextlib.ExitStack() as stack:
        config = _config(db, Path(scripts), hosts)
        local_engine = None
        if hatchet_bin is not None:  # the engine starts while Ray and the hosts do
            progress("starting the Hatchet engine…")
            local_engine = _Engine(server, hatchet_bin)
            stack.callback(local_engine.stopped)
        import ray

        from actors.cluster import connect

        connect(config, num_cpus=2, include_dashboard=False, log_to_driver=False)
        stack.callback(ray.shutdown)
        ledger = stack.enter_context(Ledger(db.url))
        placed = place_agents(ledger, config, owner=True)
        progress("starting the shared host actors…")
        began = time.perf_counter()
        asyncio.run(start_hosts(placed, config))
        result["hosts_start_s"] = round(time.perf_counter() - began, 1)
        if local_engine is not None:  # its worker starts while the hosts warm up
            engine = local_engine.started()
            stack.enter_context(overlaid(engine.client_env))
            worker = stack.enter_context(_hatchet_worker(engine.client_env, config))
        progress("one warm run on each host…")
        _warm(ledger, placed, hosts)
        if local_engine is not None:
            from hatchet_sdk import Hatchet

            progress("waiting for the Hatchet worker to listen…")
            hatchet = Hatchet()
            _wait_listening(hatchet)
        progress("built-in backend: lateness…")
        result["builtin"] = {"lateness": builtin_lateness(ledger, config, placed, fires, count)}
        if local_engine is not None:
            result["hatchet"] = hatchet_lateness(
                ledger, hatchet, engine, fires, count, progress, restart_fires
            )
            worker.terminate()  # both exit gracefully (seconds) while the rest stops
            local_engine.begin_stop()
        # the in-process agents of the throughput import litellm while the rest stops
        litellm_loading()
        asyncio.run(placed.close())
    progress(f"built-in backend: throughput with {pending:,} pending timers…")
    result["builtin"]["throughput"] = builtin_throughput(db.url, pending, due=due, agents=50)
    result["targets"] = {
        "builtin_lateness_p99_ms_max": 250,
        "hatchet_lateness_p99_ms_max": 250,
        "hatchet_after_restart_p99_ms_max": 2000,
    }
    return result
