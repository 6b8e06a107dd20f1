"""Two raylets on this machine: agents on both nodes; the worker node dies mid-run; its agents'
actors restart on the other node and their interrupted runs resume."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from actors.cluster import WORKER_NICENESS
from actors.directory import NAMESPACE, AgentDirectory
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.messages import Activate, Result, RunResult, Submit
from tests.components import missing_component
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]
TERMINAL = {c.__name__ for c in ev.TERMINAL_RUN_EVENTS}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import ray

    try:
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            ray.shutdown()
        nodes = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "_system_config": {"worker_niceness": WORKER_NICENESS},  # as connect() does
            },
        )
        worker = nodes.add_node(num_cpus=1)
        ray.init(
            address=nodes.address,
            namespace=f"owlclaw-mn-{uuid.uuid4().hex[:6]}",
            runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}},
            log_to_driver=False,
        )
        nodes.wait_for_nodes()
    except Exception as e:
        missing_component("a two-node local Ray cluster", e)
    yield nodes, worker
    ray.shutdown()
    nodes.shutdown()


def test_agents_on_a_dying_node_restart_elsewhere_and_resume(
    cluster: Any, pg_server: Database, tmp_path: Any
) -> None:
    import ray

    nodes, worker = cluster
    db = pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    decide = {"name": "log_decision", "arguments": {"decision_type": "other"}}
    steps = [
        {"tool_calls": [{**decide, "arguments": {**decide["arguments"], "reasoning": f"s{i}"}}]}
        for i in range(6)
    ]
    (tmp_path / "paced.json").write_text(json.dumps({"steps": steps, "latency_s": 0.8}))
    config = OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/paced",), scripts_dir=str(tmp_path)),
    )
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    head_id = next(n["NodeID"] for n in ray.nodes() if n["NodeID"] != worker.node_id)
    for node in (head_id, worker.node_id):  # both raylets up, with a worker process, first
        assert _runs_a_task_on(node) == node
    with Ledger(db.url) as ledger:

        def directory(node: str) -> AgentDirectory:
            """Soft affinity: placed on that node while it lives, elsewhere after."""
            strategy = NodeAffinitySchedulingStrategy(node, soft=True)
            options = {"num_cpus": 0, "scheduling_strategy": strategy}
            return AgentDirectory(ledger, config, actor_options=options)

        directories = {node: directory(node) for node in (head_id, worker.node_id)}
        agents = [f"spread-{i}" for i in range(6)]
        home = {a: (head_id, worker.node_id)[i % 2] for i, a in enumerate(agents)}
        for agent_id in agents:
            ledger.register_agent(agent_id)
        placed = {a: _placed(directories, home[a], a, directory) for a in agents}
        assert set(placed.values()) == {head_id, worker.node_id}  # agents on both nodes
        for agent_id in agents:  # activated (litellm imported) before the runs start
            ray.get(
                directories[home[agent_id]].handle(agent_id).ask.remote(Activate(agent_id=agent_id))
            )
        doomed = [  # the worker's agents' processes, asked now: the kill follows the starts
            ray.get(directories[home[a]].handle(a).pid.remote())
            for a in agents
            if placed[a] == worker.node_id
        ]
        run_ids = {
            a: asyncio.run(directories[home[a]].ask(Submit(agent_id=a, trigger="webhook")))
            for a in agents
        }

        def started(run_id: str) -> bool:
            events = ledger.stream(uuid.UUID(run_id))
            return any(isinstance(e, ev.DecisionLogged) for e in events)

        wait_for(lambda: all(started(r) for r in run_ids.values()), "every run's first step")
        killed_at = _kill(nodes, worker, doomed)  # the worker node dies with its agents mid-run

        async def results() -> list[RunResult]:
            waits = (
                directories[home[a]].ask(Result(agent_id=a, run_id=r)) for a, r in run_ids.items()
            )
            return list(await asyncio.gather(*waits))

        outcomes = asyncio.run(results())
        moved = [a for a in agents if placed[a] == worker.node_id]
        after = {a: ray.get(directories[home[a]].handle(a).node.remote()) for a in moved}
        for directory in directories.values():
            asyncio.run(directory.close())
        histories = {a: ledger.stream(uuid.UUID(r)) for a, r in run_ids.items()}
    pg_server.drop_database(str(db.params["dbname"]))
    assert [o.status for o in outcomes] == ["completed"] * 6
    assert moved and all(node != worker.node_id for node in after.values())
    for agent_id, events in histories.items():
        kinds = [type(e).__name__ for e in events]
        assert sum(k in TERMINAL for k in kinds) == 1
        calls = [e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)]
        assert len(calls) == len(set(calls)) == 6  # no completed tool call repeated
        assert kinds.count("DecisionLogged") == 6
        if agent_id in moved and "RunResumed" not in kinds:
            assert events[-1].timestamp <= killed_at  # it had ended before its node died
        if agent_id not in moved:
            assert "RunResumed" not in kinds
    resumed = [a for a in moved if "RunResumed" in [type(e).__name__ for e in histories[a]]]
    assert resumed  # at least one run was cut mid-way and resumed on the other node


def _placed(
    directories: dict[str, AgentDirectory],
    node: str,
    agent_id: str,
    directory: Callable[[str], AgentDirectory],
    attempts: int = 5,
) -> str:
    """The node of ``agent_id``'s actor, created on ``node``. Soft affinity lets Ray's GCS put it
    elsewhere when its view of ``node`` lags (seen once, under two other test runs' load): such
    an actor is killed and created again, with a fresh handle cache, a bounded number of times.
    The last one is kept wherever it is (ci: all five of spread-1's went to the head node; the
    fifth was killed too, so the next ``handle`` call made a sixth, on the worker, which died
    with it and resumed its run while ``placed`` still said head)."""
    import ray

    for attempt in range(attempts):
        handle = directories[node].handle(agent_id)
        where = str(ray.get(handle.node.remote()))
        if where == node or attempt == attempts - 1:
            return where  # the last actor is kept where it is: never the node of a killed one
        name = directories[node].actor_name(agent_id)
        ray.kill(handle, no_restart=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.1)
        directories[node] = directory(node)
    return where


def _kill(nodes: Any, worker: Any, pids: list[int]) -> datetime:
    """Remove ``worker`` and wait until its worker processes have exited. Removing a node of
    this one-machine test cluster stops its raylet, but its actors' processes (``pids``) can
    live on — they outlived it by seconds (and finished a run), once by over a minute (ci28,
    ci32) — which a machine that dies does not do: they are SIGKILLed with it. Returns when the
    last of them was gone."""
    import psutil
    from ray._private import ray_constants

    raylet = worker.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
    children = psutil.Process(raylet.pid).children(recursive=True)
    known = {c.pid for c in children}
    for pid in pids:
        if pid not in known:
            with contextlib.suppress(psutil.NoSuchProcess):
                children.append(psutil.Process(pid))
    nodes.remove_node(worker)
    for process in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    _, alive = psutil.wait_procs(children, timeout=60)
    assert not alive, f"worker processes outlived their node by 60 s: {alive}"
    return datetime.now(UTC)


def _runs_a_task_on(node: str) -> str:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def where() -> str:
        return str(ray.get_runtime_context().get_node_id())

    strategy = NodeAffinitySchedulingStrategy(node, soft=False)
    return str(ray.get(where.options(scheduling_strategy=strategy).remote()))
