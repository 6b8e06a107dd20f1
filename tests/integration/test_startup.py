"""Start-up: the server serves while the embedding model still loads in the background (a recall
waits for that load, then answers); a stop right after the start does not wait for it; and
``owlclaw run`` with local placement imports none of the heavy modules before it serves."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from events import Ledger
from owlclaw.app import load_app
from owlclaw.bench import free_port
from owlclaw.database import Database
from owlclaw.reports.inspection import memory_of
from owlclaw.server.service import Service
from owlclaw.server.startup import HEAVY_MODULES
from owlclaw.server.webhook import serving
from projections import MemoryView
from tests.apps import make_app
from tests.cli import owlclaw, start_run, stop_run, user_env
from tests.ledger_runs import remember
from tests.served import local_service

pytestmark = pytest.mark.integration

LESSON = "The broker API rate-limits at 10 requests per second"
HANG_S = 120
"""A bound on what must not hang (not a speed figure)."""


def held_service(fresh_db: Database, tmp_path: Path, gate: threading.Event) -> Service:
    """A locally placed service whose embedding model's load waits for ``gate``."""
    root = make_app(tmp_path / "held", config='[agent]\nid = "held"\nmodels = ["scripted/held"]\n')
    config = local_service(fresh_db, tmp_path)
    return Service(config, [load_app(root)], before_model_load=gate.wait)


def test_the_server_serves_while_the_model_loads_and_a_recall_waits_for_the_load(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as ledger:  # indexed at start: the indexing waits for the load
        remember(ledger, ledger.register_agent("rememberer"), [LESSON])
    gate = threading.Event()
    service = held_service(fresh_db, tmp_path, gate)
    config = service.config

    async def scenario() -> None:
        async with serving(service, config):
            async with httpx.AsyncClient(trust_env=False) as http:
                status = await http.get(
                    f"http://127.0.0.1:{config.server.port}/status",
                    headers={"Authorization": "Bearer test-token"},
                )
            assert status.status_code == 200
            report = status.json()
            assert {w["state"] for w in report["workers"]} == {"running"}
            assert "embedding_model" not in report["startup"]["background_s"]  # still held
            assert service.ledger is not None
            recall = asyncio.ensure_future(
                asyncio.to_thread(
                    memory_of,
                    service.ledger,
                    service.view(MemoryView),
                    config,
                    "rememberer",
                    LESSON,
                )
            )
            done, _ = await asyncio.wait([recall], timeout=1.0)
            assert not done  # waits for the held load
            gate.set()
            reading = await asyncio.wait_for(recall, HANG_S)
            assert reading.recall is not None
            assert [m.content for m in reading.recall.memories] == [LESSON]
            assert "embedding_model" in service.status()["startup"]["background_s"]

    try:
        asyncio.run(scenario())
    finally:
        gate.set()


def test_a_stop_right_after_the_start_does_not_wait_for_the_held_load(
    fresh_db: Database, tmp_path: Path
) -> None:
    gate = threading.Event()
    service = held_service(fresh_db, tmp_path, gate)

    async def start_and_stop() -> None:
        await service.start()
        await service.stop()

    try:
        # asyncio.run also closes the loop's default executor: a load run there held it
        asyncio.run(asyncio.wait_for(start_and_stop(), HANG_S))
        assert not gate.is_set()
        assert "embedding_model" not in service.startup.background  # the load is still held
    finally:
        gate.set()


def test_owlclaw_run_with_local_placement_imports_no_heavy_module_before_serving(
    tmp_path: Path,
) -> None:
    env = user_env(
        tmp_path / ".owlclaw",
        port := free_port(),
        OWLCLAW_PLACEMENT="local",
        OWLCLAW_SERVER_TOKEN="startup-token",
    )
    made = owlclaw(env, "init", "my-agent", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    server, log = start_run(env, tmp_path, "my-agent")
    try:
        assert server.poll() is None, log.read_text()
        status = httpx.get(
            f"http://127.0.0.1:{port}/status",
            headers={"Authorization": "Bearer startup-token"},
            trust_env=False,
            timeout=HANG_S,
        )
        assert status.status_code == 200, status.text
        startup = status.json()["startup"]
        assert startup["imported_before_serving"] == [], startup
        assert set(HEAVY_MODULES) >= {"litellm", "onnxruntime", "mcp", "a2a", "hatchet_sdk"}
        assert {"process", "postgresql", "database", "agents", "timers"} <= set(startup["phases"])
    finally:
        stop_run(server)
