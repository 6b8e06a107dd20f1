"""``owlclaw bench timers``: fire lateness of both backends and the built-in backend's throughput.

Lateness is a fire's scheduled time to its TimerFired being recorded (the event is committed
with the run's start right after). Each fire starts a real run (scripted model, zero latency).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.bench import percentiles
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.timers.fires import FireOutcome, TimerFire
from owlclaw.timers.service import TimersView
from owlclaw.timers.worker import TimerWorker
from projections import ProjectionRunner

SCRIPT = "bench-timers"
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


def _lateness_ms(ledger: Ledger, agents: list[str]) -> list[float]:
    return [
        (e.timestamp - e.fire_time).total_seconds() * 1000
        for agent_id in agents
        for e in ledger.stream(ledger.load_agent(agent_id).id)
        if isinstance(e, ev.TimerFired)
    ]


def _local(ledger: Ledger) -> AgentHost:
    register_script(SCRIPT, [{"content": "fired"}])
    config = OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{SCRIPT}",)))
    return AgentHost(ledger, config)


def builtin_lateness(url: str, fires: int, agents: int) -> dict[str, Any]:
    with Ledger(url) as ledger:
        view = TimersView(ledger.datastore, ledger=ledger)
        view.create_table()
        start = datetime.now(UTC) + timedelta(seconds=3)
        names = [f"late-{i}" for i in range(agents)]
        spacing = timedelta(milliseconds=25)
        _schedule(ledger, [(names[i % agents], start + i * spacing) for i in range(fires)])
        ProjectionRunner(ledger, view).catch_up()
        local = _local(ledger)
        worker = TimerWorker(view, local.fire)

        async def until_done() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(worker.run(stop))
            deadline = time.monotonic() + 60 + fires * 0.05
            while len(_lateness_ms(ledger, names)) < fires and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            stop.set()
            await task
            await local.close()

        asyncio.run(until_done())
        late = _lateness_ms(ledger, names)
    return {"fires": len(late), **percentiles(late)}


def builtin_throughput(url: str, pending: int, due: int, agents: int) -> dict[str, Any]:
    with Ledger(url) as ledger:
        view = TimersView(ledger.datastore, ledger=ledger)
        view.create_table()
        now = datetime.now(UTC)
        far = now + timedelta(days=7)
        _schedule(ledger, [(f"idle-{i % 100}", far + timedelta(seconds=i)) for i in range(pending)])
        names = [f"busy-{i}" for i in range(agents)]
        soon = now + timedelta(seconds=2)
        _schedule(ledger, [(names[i % agents], soon) for i in range(due)])
        ProjectionRunner(ledger, view).catch_up()
        with view.datastore.transaction(commit=False) as curs:
            row = curs.execute(view.sql("SELECT count(*) AS n FROM {timers}")).fetchone()
        held = int(row["n"]) if row else 0
        local = _local(ledger)
        fired: list[tuple[str, str]] = []

        async def deliver(fire: TimerFire) -> FireOutcome:
            outcome = await local.fire(fire)
            if outcome.run_id is not None:
                fired.append((fire.agent_id, outcome.run_id))
            return outcome

        async def deliver_all() -> float:
            worker = TimerWorker(view, deliver, batch=500)
            await asyncio.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()))
            began = time.perf_counter()
            delivered = 0
            while delivered < due:
                delivered += await worker.tick()
            await asyncio.gather(*(local.result(a, r) for a, r in fired))  # each fire's run
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
def _hatchet_worker(engine_env: dict[str, str], db: Database) -> Iterator[None]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"{SCRIPT}.json").write_text(json.dumps({"steps": [{"content": "fired"}]}))
        env = {
            **os.environ,
            **engine_env,
            "OWLCLAW_DATABASE_URL": db.url,
            "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
            "OWLCLAW_MODELS": f"scripted/{SCRIPT}",
            "OWLCLAW_SCRIPTS_DIR": tmp,
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "owlclaw", "timers", "hatchet-worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield
        finally:
            process.terminate()
            process.wait(timeout=30)


def hatchet_lateness(
    server: Database, db: Database, fires: int, agents: int, bin_dir: Path, progress: Progress
) -> dict[str, Any]:
    from owlclaw.timers.hatchet_backend import TASK, HatchetBackend
    from owlclaw.timers.hatchet_engine import start_engine

    engine_db = server.create_database(f"owlclaw_bench_hatchet_{uuid.uuid4().hex[:6]}")
    engine = start_engine(engine_db.url, Path(tempfile.mkdtemp(prefix="hatchet-")), bin_dir)
    saved = dict(os.environ)
    os.environ.update(engine.client_env)
    try:
        from hatchet_sdk import Hatchet

        hatchet = Hatchet()
        with _hatchet_worker(engine.client_env, db), Ledger(db.url) as ledger:
            deadline = time.monotonic() + 60
            while not hatchet.workflows.list(workflow_name=TASK).rows:
                if time.monotonic() > deadline:
                    raise RuntimeError("the Hatchet worker did not register its task")
                time.sleep(0.5)
            view = TimersView(ledger.datastore, backend=HatchetBackend(hatchet), ledger=ledger)
            view.create_table()
            start = datetime.now(UTC) + timedelta(seconds=15)
            names = [f"hatchet-{i}" for i in range(agents)]
            spacing = timedelta(milliseconds=50)
            _schedule(ledger, [(names[i % agents], start + i * spacing) for i in range(fires)])
            progress(f"registering {fires} one-off schedules with Hatchet…")
            ProjectionRunner(ledger, view).catch_up()
            progress("waiting for Hatchet's fires…")
            deadline = time.monotonic() + 120 + fires * 0.1
            while len(_lateness_ms(ledger, names)) < fires and time.monotonic() < deadline:
                time.sleep(1)
            late = _lateness_ms(ledger, names)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        engine.stop()
        server.drop_database(str(engine_db.params["dbname"]))
    return {"fires": len(late), **percentiles(late)}


def run(
    server: Database,
    db: Database,
    *,
    fires: int = 200,
    pending: int = 10_000,
    hatchet_bin: Path | None = None,
    progress: Progress = lambda _: None,
) -> dict[str, Any]:
    progress("built-in backend: lateness…")
    result: dict[str, Any] = {"builtin": {"lateness": builtin_lateness(db.url, fires, agents=20)}}
    progress(f"built-in backend: throughput with {pending:,} pending timers…")
    result["builtin"]["throughput"] = builtin_throughput(db.url, pending, due=1000, agents=50)
    if hatchet_bin is not None:
        result["hatchet"] = {
            "lateness": hatchet_lateness(server, db, fires, 20, hatchet_bin, progress),
            "note": "the engine polls its schedules; lateness is what it gives here",
        }
    result["targets"] = {"builtin_lateness_p99_ms_max": 250}
    return result
