"""Agents as Ray actors on a real local Ray cluster: mailbox order, parallel agents, both
placements, unknown agents, two actors for one agent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import msgspec
import pytest

from actors.directory import AgentDirectory
from actors.ray_host import AgentHostActor
from events import Ledger, UnknownAgent
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from tests.conftest import missing_component

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_cluster(config: OwlClawConfig) -> Iterator[None]:
    import ray

    from actors.cluster import connect

    try:  # a local cluster, started the way a driver without OWLCLAW_RAY_ADDRESS starts one
        connect(config, num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:
        missing_component("a local Ray cluster", e)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def db(pg_server: Database) -> Iterator[Database]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def config(db: Database, tmp_path_factory: pytest.TempPathFactory) -> OwlClawConfig:
    scripts = tmp_path_factory.mktemp("scripts")
    decide = {"name": "log_decision", "arguments": {"reasoning": "ok", "decision_type": "other"}}
    (scripts / "one_tool.json").write_text(json.dumps({"steps": [{"tool_calls": [decide]}]}))
    (scripts / "slow.json").write_text(json.dumps({"steps": [], "latency_s": 1.0}))
    paced = [
        {"tool_calls": [{**decide, "arguments": {"reasoning": f"step {i}"}}]} for i in range(3)
    ]
    (scripts / "paced.json").write_text(json.dumps({"steps": paced, "latency_s": 0.7}))
    return OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/one_tool",), scripts_dir=str(scripts)),
    )


@pytest.fixture(scope="module")
def ledger(db: Database) -> Iterator[Ledger]:
    with Ledger(db.url) as led:
        yield led


def playing(config: OwlClawConfig, script: str) -> OwlClawConfig:
    """The test cluster's configuration with ``scripted/<script>`` as the model."""
    runtime = msgspec.structs.replace(config.runtime, models=(f"scripted/{script}",))
    return msgspec.structs.replace(config, runtime=runtime)


def runs_of(ledger: Ledger, agent_id: str) -> list[list[ev.LedgerEvent]]:
    return [ledger.stream(r) for r in ledger.list_runs(agent_id)]


def test_runs_of_one_agent_execute_one_at_a_time_in_submission_order(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    directory = AgentDirectory(ledger, config)
    directory.register("ordered")

    async def submit_all() -> list[dict[str, Any]]:
        run_ids = await asyncio.gather(
            *(directory.submit("ordered", "webhook", focus=f"n{i}") for i in range(100))
        )
        return list(await asyncio.gather(*(directory.result("ordered", r) for r in run_ids)))

    results = asyncio.run(submit_all())
    directory.shutdown()
    assert [r["status"] for r in results] == ["completed"] * 100
    runs = runs_of(ledger, "ordered")
    assert len(runs) == 100
    for earlier, later in pairwise(runs):
        assert isinstance(later[0], ev.RunStarted) and later[0].timestamp >= earlier[-1].timestamp
    ends = [r[-1] for r in runs]
    assert all(isinstance(e, ev.RunCompleted) for e in ends)
    assert [r[0].run_no for r in runs] == list(range(1, 101))  # type: ignore[attr-defined]


@pytest.mark.parametrize("placement", ["dedicated", "shared"])
def test_runs_of_different_agents_run_in_parallel(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig, placement: str
) -> None:
    slow = playing(config, "slow")
    directory = AgentDirectory(ledger, slow, placement=placement, pool_size=1)  # type: ignore[arg-type]
    agents = [f"{placement}-{i}" for i in range(4)]
    for agent_id in agents:
        directory.register(agent_id)

    async def all_at_once() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(directory.run(a, "webhook") for a in agents)))

    asyncio.run(all_at_once())  # actor start-up (a process importing litellm) outside the timing

    began = time.perf_counter()
    results = asyncio.run(all_at_once())
    elapsed = time.perf_counter() - began
    import ray

    host = ray.get(directory.handle(agents[0]).status.remote())  # everything on that host
    directory.shutdown()
    assert [r["status"] for r in results] == ["completed"] * 4
    assert elapsed < 3.0, f"4 runs of 1 s each took {elapsed:.1f} s: agents were serialized"
    if placement == "shared":
        assert set(agents) <= set(host["agents"])  # one host holds them all


def test_unknown_agent_is_a_clear_error(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    directory = AgentDirectory(ledger, config)
    with pytest.raises(UnknownAgent, match="nobody"):
        asyncio.run(directory.submit("nobody", "webhook"))


def test_two_actors_for_one_agent_never_fork_its_streams(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    import ray

    ledger.register_agent("contested")
    twins = [
        AgentHostActor.options(name=f"twin-{i}-{uuid.uuid4().hex[:4]}").remote(  # type: ignore[attr-defined]
            msgspec.to_builtins(config), None
        )
        for i in range(2)
    ]

    async def race() -> list[Any]:
        calls = [twins[i % 2].submit.remote("contested", "webhook") for i in range(40)]
        return list(await asyncio.gather(*calls, return_exceptions=True))

    outcomes = asyncio.run(race())
    accepted = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if not isinstance(o, str)]
    for run_id in accepted:
        owner = twins[outcomes.index(run_id) % 2]
        with contextlib.suppress(Exception):  # a run may lose a contested append: see below
            ray.get(owner.result.remote("contested", run_id), timeout=60)
    for twin in twins:
        ray.kill(twin)
    assert accepted and all("StreamConflict" in str(r) for r in refused)
    queued = [
        e for e in ledger.stream(ledger.load_agent("contested").id) if isinstance(e, ev.RunQueued)
    ]
    assert sorted(q.run_no for q in queued) == list(range(1, len(queued) + 1))  # no fork
    assert {str(q.run_id) for q in queued} == set(accepted)  # every accepted id is recorded
    for run in runs_of(ledger, "contested"):
        versions = [e.originator_version for e in run]
        assert versions == list(range(1, len(versions) + 1))


def test_a_killed_agent_actor_restarts_and_its_interrupted_run_resumes(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    import signal

    import ray

    paced = playing(config, "paced")
    directory = AgentDirectory(ledger, paced)
    directory.register("phoenix")
    run_id = asyncio.run(directory.submit("phoenix", "webhook", focus="three steps"))

    def decisions() -> int:
        return sum(isinstance(e, ev.DecisionLogged) for e in ledger.stream(uuid.UUID(run_id)))

    deadline = time.monotonic() + 60
    while decisions() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = ray.get(directory.handle("phoenix").pid.remote())
    os.kill(pid, signal.SIGKILL)  # mid-run: a model call is in flight
    result = asyncio.run(directory.result("phoenix", run_id))
    new_pid = ray.get(directory.handle("phoenix").pid.remote())
    directory.shutdown()
    events = ledger.stream(uuid.UUID(run_id))
    kinds = [type(e).__name__ for e in events]
    assert result["status"] == "completed" and new_pid != pid
    assert "RunResumed" in kinds
    assert kinds.count("DecisionLogged") == 3  # each step's effect exactly once
    succeeded = [e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert len(succeeded) == len(set(succeeded)) == 3  # no completed tool call repeated
    assert sum(k in {c.__name__ for c in ev.TERMINAL_RUN_EVENTS} for k in kinds) == 1


def test_timer_fires_are_delivered_to_the_agent_actor(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    from datetime import timedelta

    from owlclaw.timers.service import TimersView
    from owlclaw.timers.worker import TimerWorker
    from projections import ProjectionRunner

    directory = AgentDirectory(ledger, config)
    agent = ledger.register_agent("timed")
    agent.record(
        ev.ScheduleRequested,
        schedule_id="sch_timed",
        kind="once",
        focus="check entry opportunities",
        agent_id="timed",
        delay_seconds=60,
        fire_at=agent.state.registered_at + timedelta(seconds=60),  # type: ignore[operator]
    )
    ledger.append(agent)
    view = TimersView(ledger.datastore, ledger=ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    later = agent.state.registered_at + timedelta(minutes=2)  # type: ignore[operator]
    worker = TimerWorker(view, directory.fire, clock=lambda: later)
    assert asyncio.run(worker.tick()) == 1
    fired = [e for e in ledger.stream(agent.id) if isinstance(e, ev.TimerFired)]
    assert len(fired) == 1 and fired[0].run_id is not None
    deadline = time.monotonic() + 30
    while not ledger.load_run(fired[0].run_id).state.ended and time.monotonic() < deadline:
        time.sleep(0.1)
    run = ledger.load_run(fired[0].run_id).state
    assert (run.trigger, run.focus, run.status) == (
        "schedule_once",
        "check entry opportunities",
        "completed",
    )
    import ray

    assert "timed" in ray.get(directory.handle("timed").status.remote("timed"))["agents"]
    directory.shutdown()


def test_a_caller_streams_a_runs_events_while_it_runs(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    paced = playing(config, "paced")
    directory = AgentDirectory(ledger, paced)
    directory.register("streamed")

    async def follow() -> list[tuple[str, float]]:
        run_id = await directory.submit("streamed", "webhook")
        loop = asyncio.get_running_loop()
        return [(type(e).__name__, loop.time()) async for e in directory.events(run_id)]

    seen = asyncio.run(follow())
    directory.shutdown()
    kinds = [k for k, _ in seen]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert kinds.count("DecisionLogged") == 3
    assert seen[-1][1] - seen[0][1] > 1.0  # delivered while the run went on, not at its end
