"""The webhook of a real `owlclaw run` service (in this process, agents hosted locally): a retried
trigger with the same Idempotency-Key gets the same run, through HTTP and through `owlclaw
trigger`; a timer fire posted by the Hatchet worker reaches the agent's one writer."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import httpx
import psutil
import pytest

from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.client import ServerClient, ServerRefused
from owlclaw.config import OwlClawConfig, TimersConfig
from owlclaw.database import Database
from owlclaw.messages import Fire, Result, Submit
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from owlclaw.supervisor import WorkerStatus
from owlclaw.timers.hatchet_engine import missing_binaries
from owlclaw.tools.governance import OPERATOR_DISABLED
from tests.apps import make_app
from tests.cli import owlclaw, user_env
from tests.components import missing_component
from tests.served import local_service

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration
T = TypeVar("T")


PLAN_THEN_ANSWER = {
    "cases": [
        {
            "when": "Focus: plan",
            "steps": [
                {
                    "tool_calls": [
                        {
                            "name": "schedule_once",
                            # beyond the 8 s lead below which Hatchet holds no timer, with
                            # 7 s for the served timers view to register it on a loaded machine
                            "arguments": {"delay_seconds": 15, "focus": "fired"},
                        }
                    ]
                },
                {"content": "planned"},
            ],
        },
        {"when": "Trigger", "steps": [{"content": "ok"}]},
    ]
}


def serve_and(
    fresh_db: Database,
    tmp_path: Path,
    then: Callable[[Service, OwlClawConfig], Awaitable[T]],
    timers: TimersConfig | None = None,
) -> T:
    root = make_app(
        tmp_path / "hooked", config='[agent]\nid = "hooked"\nmodels = ["scripted/hooked"]\n'
    )
    (root / "scripts").mkdir()
    (root / "scripts" / "hooked.json").write_text(json.dumps(PLAN_THEN_ANSWER))
    config = local_service(
        fresh_db,
        tmp_path,
        timers=timers or TimersConfig(),
    )
    service = Service(config, [load_app(root)])

    async def main() -> T:
        async with serving(service, config):
            return await then(service, config)

    return asyncio.run(main())


def queued(service: Service) -> list[ev.RunQueued]:
    assert service.ledger is not None
    agent = service.ledger.load_agent("hooked")
    return [e for e in service.ledger.stream(agent.id) if isinstance(e, ev.RunQueued)]


def test_a_trigger_retried_with_its_idempotency_key_returns_the_same_run(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        url = f"http://127.0.0.1:{config.server.port}/agents/hooked/trigger"
        headers = {"Authorization": "Bearer test-token", "Idempotency-Key": "order-42"}
        async with httpx.AsyncClient(trust_env=False) as http:
            first = await http.post(url, json={"focus": "once"}, headers=headers)
            retry = await http.post(url, json={"focus": "once"}, headers=headers)
            other = await http.post(
                url, json={}, headers={**headers, "Idempotency-Key": "order-43"}
            )
            too_long = await http.post(
                url, json={}, headers={**headers, "Idempotency-Key": "k" * 201}
            )
        assert (first.status_code, retry.status_code, other.status_code) == (202, 202, 202)
        assert first.json()["run_id"] == retry.json()["run_id"] != other.json()["run_id"]
        assert too_long.status_code == 400 and too_long.json()["code"] == "bad_request"
        keys = [(q.idempotency_key, str(q.run_id)) for q in queued(service)]
        assert keys == [("order-42", first.json()["run_id"]), ("order-43", other.json()["run_id"])]

        env = user_env(tmp_path / "data", config.server.port, OWLCLAW_SERVER_TOKEN="test-token")

        def trigger(*options: str) -> dict[str, str]:  # a CLI process, the server answers here
            done = owlclaw(env, "trigger", "hooked", "--no-wait", "--json", *options, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            answer: dict[str, str] = json.loads(done.stdout)
            return answer

        keyed = [await asyncio.to_thread(trigger, "--idempotency-key", "cli-1") for _ in range(2)]
        assert keyed[0]["run_id"] == keyed[1]["run_id"]
        await asyncio.to_thread(trigger)
        generated = [q.idempotency_key for q in queued(service)][-1]
        assert generated and generated not in {"order-42", "order-43", "cli-1"}  # the CLI's own
        assert len(queued(service)) == 4

    serve_and(fresh_db, tmp_path, scenario)


def test_a_fire_posted_to_the_server_is_judged_by_the_agent_it_hosts(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        assert service.ledger is not None
        ledger = service.ledger
        at = datetime.now(UTC) + timedelta(minutes=5)
        agent = ledger.load_agent("hooked")
        agent.record(
            ev.ScheduleRequested,
            schedule_id="sch-hooked",
            kind="once",
            focus="posted",
            agent_id="hooked",
            delay_seconds=300,
            fire_at=at,
        )
        ledger.append(agent)
        fire = Fire(agent_id="hooked", schedule_id="sch-hooked", fire_time=at)
        with ServerClient(config) as client:
            ready_ms = await asyncio.to_thread(client.activate, "hooked")
            with pytest.raises(ServerRefused) as stranger:
                await asyncio.to_thread(client.activate, "stranger")
            first = await asyncio.to_thread(client.fire, fire)
            second = await asyncio.to_thread(client.fire, fire)
        assert ready_ms >= 0 and "hooked" in (await service.agents.status()).agents
        assert (stranger.value.status, stranger.value.code) == (404, "unknown_agent")
        async with httpx.AsyncClient(trust_env=False) as http:
            misrouted = await http.post(
                f"http://127.0.0.1:{config.server.port}/agents/hooked/fires",
                json={"agent_id": "other", "schedule_id": "s", "fire_time": at.isoformat()},
                headers={"Authorization": "Bearer test-token"},
            )
        assert first.kind == "fire" and first.run_id is not None
        assert (second.kind, second.run_id) == ("duplicate", None)
        assert misrouted.status_code == 400 and "'other'" in misrouted.json()["error"]
        result = await service.ask(Result(agent_id="hooked", run_id=first.run_id))
        assert result.status == "completed"
        assert [q.trigger for q in queued(service)] == ["schedule_once"]

    serve_and(fresh_db, tmp_path, scenario)


def test_with_local_placement_hatchet_fires_reach_the_agent_through_the_server(
    fresh_db: Database, tmp_path: Path
) -> None:
    """The Hatchet worker `owlclaw run` starts is a process of its own; with the agents hosted
    in the server's process it delivers through the server, the agents' one writer. A worker
    whose listener process died (the SDK does not retry a refused registration) exits, and the
    service starts another that delivers the next fire."""
    bin_dir = Path(os.environ.get("OWLCLAW_HATCHET_BIN", ROOT / ".owlclaw" / "bin"))
    if missing := missing_binaries(bin_dir):
        missing_component("the Hatchet engine", f"no {', '.join(missing)} in {bin_dir}")
    worker_log = tmp_path / "data" / "hatchet-worker.log"

    async def scenario(service: Service, config: OwlClawConfig) -> None:
        assert service.ledger is not None and service.timer_backend == "hatchet"
        ledger = service.ledger

        async def plan_and_fire(runs: int) -> ev.RunQueued:
            planned = await service.ask(Submit(agent_id="hooked", trigger="webhook", focus="plan"))
            done = await service.ask(Result(agent_id="hooked", run_id=planned))
            assert done.status == "completed"
            deadline = time.monotonic() + 90
            while len(fired := fired_runs()) < runs:
                assert time.monotonic() < deadline, worker_log.read_text()[-3000:]
                await asyncio.sleep(0.2)
            run = fired[-1]
            result = await service.ask(Result(agent_id="hooked", run_id=str(run.run_id)))
            assert result.status == "completed"
            return run

        def fired_runs() -> list[ev.RunQueued]:
            return [q for q in queued(service) if q.trigger == "schedule_once"]

        first = await plan_and_fire(1)
        deaf = hatchet_worker()
        [listener] = [p for p in deaf.children() if "spawn_main" in " ".join(p.cmdline())]
        listener.kill()
        deadline = time.monotonic() + 60
        while not (watch := supervised(service, "hatchet-worker")).restarts:
            assert time.monotonic() < deadline, watch
            await asyncio.sleep(0.2)
        assert watch.last_error is not None and "exited with status 1" in watch.last_error
        assert "action listener died" in worker_log.read_text()
        assert hatchet_worker().pid != deaf.pid
        second = await plan_and_fire(2)
        agent_events = ledger.stream(ledger.load_agent("hooked").id)
        registered = [e for e in agent_events if isinstance(e, ev.ScheduleRegistered)]
        assert [r.backend for r in registered] == ["hatchet", "hatchet"]
        fired = [e for e in agent_events if isinstance(e, ev.TimerFired)]
        assert [f.run_id for f in fired] == [first.run_id, second.run_id]
        assert first.focus == second.focus == "fired"

    hatchet = TimersConfig(backend="hatchet", hatchet_bin=str(bin_dir))
    serve_and(fresh_db, tmp_path, scenario, timers=hatchet)


def supervised(service: Service, name: str) -> WorkerStatus:
    return next(w for w in service.supervisor.status() if w.name == name)


def hatchet_worker() -> psutil.Process:
    """The `owlclaw timers hatchet-worker` process the service in this process started."""
    [worker] = [
        p
        for p in psutil.Process().children()
        if "hatchet-worker" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE
    ]
    return worker


def test_owlclaw_tools_disables_a_tool_through_the_server_that_serves_the_agent(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        assert service.ledger is not None
        env = user_env(tmp_path / "data", config.server.port, OWLCLAW_SERVER_TOKEN="test-token")

        def tools(*options: str) -> subprocess.CompletedProcess[str]:
            return owlclaw(env, "tools", "hooked", *options, cwd=tmp_path)

        off = await asyncio.to_thread(tools, "--disable", "remember", "--json")
        assert off.returncode == 0, off.stderr
        assert json.loads(off.stdout)["via"] == "server"
        run_id = await service.ask(
            Submit(agent_id="hooked", trigger="webhook", focus="after the switch")
        )
        await service.ask(Result(agent_id="hooked", run_id=run_id))
        [visible] = [
            e
            for e in service.ledger.stream(uuid.UUID(run_id))
            if isinstance(e, ev.VisibleToolsResolved)
        ]
        assert visible.filtered == {"remember": OPERATOR_DISABLED}
        unknown = await asyncio.to_thread(tools, "--enable", "nope")
        assert unknown.returncode == 2 and "has no tool 'nope'" in unknown.stderr

    serve_and(fresh_db, tmp_path, scenario)
