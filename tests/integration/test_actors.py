"""What only the Ray placement adds to the ``Agents`` contract (tests/agents_contract.py):
parallel agents in both placements, two actors racing for one agent, a SIGKILLed actor that
restarts and resumes, events streamed to another driver."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from actors.directory import AgentDirectory
from actors.ray_host import AgentHostActor
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.messages import Activate, Result, RunResult, Submit, SubmitAndWait

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]
SLOW_S = 3.0
"""The model latency of the parallel runs: how far apart their starts may be and still overlap."""


@pytest.fixture(scope="module")
def config(db: Database, tmp_path_factory: pytest.TempPathFactory) -> OwlClawConfig:
    scripts = tmp_path_factory.mktemp("scripts")
    decide = {"name": "log_decision", "arguments": {"reasoning": "ok", "decision_type": "other"}}
    (scripts / "one_tool.json").write_text(json.dumps({"steps": [{"tool_calls": [decide]}]}))
    (scripts / "slow.json").write_text(json.dumps({"steps": [], "latency_s": SLOW_S}))
    paced = [
        {"tool_calls": [{**decide, "arguments": {"reasoning": f"step {i}"}}]} for i in range(3)
    ]
    (scripts / "paced.json").write_text(json.dumps({"steps": paced, "latency_s": 1.0}))
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


@pytest.mark.parametrize("placement", ["dedicated", "shared"])
def test_runs_of_different_agents_run_in_parallel(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig, placement: str
) -> None:
    slow = playing(config, "slow")
    directory = AgentDirectory(ledger, slow, placement=placement, pool_size=1)  # type: ignore[arg-type]
    agents = [f"{placement}-{i}" for i in range(4)]
    for agent_id in agents:
        ledger.register_agent(agent_id)

    async def all_at_once() -> list[RunResult]:
        await asyncio.gather(
            *(directory.ask(Activate(agent_id=a)) for a in agents)
        )  # actors up (litellm)
        return list(
            await asyncio.gather(
                *(directory.ask(SubmitAndWait(agent_id=a, trigger="webhook")) for a in agents)
            )
        )

    results = asyncio.run(all_at_once())
    import ray

    host = ray.get(directory.handle(agents[0]).status.remote())  # everything on that host
    asyncio.run(directory.close())
    assert [r.status for r in results] == ["completed"] * 4
    # All four in flight at one moment (from RunStarted to the end event), read from the
    # ledger, not from a stopwatch: serialized, each would start after the one before ended
    spans = []
    for result in results:
        events = ledger.stream(uuid.UUID(result.run_id))
        spans.append((events[0].timestamp, events[-1].timestamp))
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans
    if placement == "shared":
        assert set(agents) <= set(host.agents)  # one host holds them all


def test_start_hosts_starts_every_shared_host_before_any_message(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    """The Hatchet worker starts them first, so no fire's delivery waits for a host to start."""
    import ray

    namespace = f"hosts-{uuid.uuid4().hex[:6]}"
    options = {"namespace": namespace}
    directory = AgentDirectory(
        ledger, config, placement="shared", pool_size=2, actor_options=options
    )
    assert asyncio.run(directory.start_hosts()) == 2
    hosts = [ray.get_actor(f"host:{i}", namespace=namespace) for i in range(2)]
    assert len({ray.get(host.pid.remote()) for host in hosts}) == 2
    assert all(ray.get(host.status.remote()).agents == {} for host in hosts)  # no message yet
    dedicated = AgentDirectory(ledger, config, placement="dedicated", actor_options=options)
    assert asyncio.run(dedicated.start_hosts()) == 0  # an agent's actor starts on its message
    asyncio.run(directory.close())


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
        calls = [
            twins[i % 2].ask.remote(Submit(agent_id="contested", trigger="webhook"))
            for i in range(40)
        ]
        return list(await asyncio.gather(*calls, return_exceptions=True))

    outcomes = asyncio.run(race())
    accepted = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if not isinstance(o, str)]
    for run_id in accepted:
        owner = twins[outcomes.index(run_id) % 2]
        with contextlib.suppress(Exception):  # a run may lose a contested append: see below
            ray.get(owner.ask.remote(Result(agent_id="contested", run_id=run_id)), timeout=60)
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
    ledger.register_agent("phoenix")
    run_id = asyncio.run(
        directory.ask(Submit(agent_id="phoenix", trigger="webhook", focus="three steps"))
    )

    def decisions() -> int:
        return sum(isinstance(e, ev.DecisionLogged) for e in ledger.stream(uuid.UUID(run_id)))

    pid = ray.get(directory.handle("phoenix").pid.remote())  # asked first: the kill follows
    deadline = time.monotonic() + 60  # after the first decision, three 1 s model calls remain
    while decisions() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)  # mid-run: a model call is in flight
    result = asyncio.run(directory.ask(Result(agent_id="phoenix", run_id=run_id)))
    new_pid = ray.get(directory.handle("phoenix").pid.remote())
    asyncio.run(directory.close())
    events = ledger.stream(uuid.UUID(run_id))
    kinds = [type(e).__name__ for e in events]
    assert result.status == "completed" and new_pid != pid
    assert "RunResumed" in kinds
    assert kinds.count("DecisionLogged") == 3  # each step's effect exactly once
    succeeded = [e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert len(succeeded) == len(set(succeeded)) == 3  # no completed tool call repeated
    assert sum(k in {c.__name__ for c in ev.TERMINAL_RUN_EVENTS} for k in kinds) == 1


def test_a_caller_streams_a_runs_events_while_it_runs(
    ray_cluster: None, ledger: Ledger, config: OwlClawConfig
) -> None:
    paced = playing(config, "paced")
    directory = AgentDirectory(ledger, paced)
    ledger.register_agent("streamed")

    async def follow() -> tuple[str, list[tuple[str, datetime]]]:
        run_id = await directory.ask(Submit(agent_id="streamed", trigger="webhook"))
        return run_id, [
            (type(e).__name__, datetime.now(UTC)) async for e in directory.events(run_id)
        ]

    run_id, seen = asyncio.run(follow())
    asyncio.run(directory.close())
    kinds = [k for k, _ in seen]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunCompleted"
    assert kinds.count("DecisionLogged") == 3
    [end] = [e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.RunCompleted)]
    assert seen[0][1] < end.timestamp  # delivered while the run went on, not at its end
