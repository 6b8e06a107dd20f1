"""Heartbeat sources on the real PostgreSQL (seed 001): served by `owlclaw run`'s service, an
agent whose [heartbeat] names a SQL count, a LISTEN channel and a query slower than its time
limit is skipped while nothing counts (the slow source reported on every skipped beat), wakes
when the count turns positive and when a NOTIFY arrives, each run showing what woke it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.server.service import Service
from tests.apps import make_app
from tests.waiting import await_for

pytestmark = pytest.mark.integration

CONFIG = """
[agent]
id = "clerk"
models = ["scripted/clerk"]
heartbeat_s = 0.3

[heartbeat.databases.orders]
url_env = "ORDERS_DATABASE_URL"

[heartbeat.sources.new_orders]
kind = "sql"
database = "orders"
query = "SELECT count(*) FROM orders WHERE status = 'new'"

[heartbeat.sources.order_events]
kind = "listen"
database = "orders"
channel = "order_events"

[heartbeat.sources.slow]
kind = "sql"
database = "orders"
query = "SELECT count(*) FROM pg_sleep(30)"
timeout_s = 0.5
"""
SCRIPT = {
    "cases": [
        {"when": "new_orders", "steps": [{"content": "Handled the new orders."}]},
        {"when": "order_events", "steps": [{"content": "Saw the order event."}]},
    ]
}
SLOW_ERRORS = {
    "timed out after 0.5 s",
    "QueryCanceled: canceling statement due to statement timeout",
}


@pytest.fixture
def orders(pg_server: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """The app's own database (not the ledger's), named to its sources by ORDERS_DATABASE_URL."""
    name = f"orders_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)")
    monkeypatch.setenv("ORDERS_DATABASE_URL", db.url)
    yield db
    pg_server.drop_database(name)


def beats(ledger: Ledger) -> list[tuple[dict[str, Any], ev.LedgerEvent]]:
    """Each ended heartbeat run: its payload (what woke it) and its end event."""
    ended = []
    for run_id in ledger.list_runs("clerk"):
        events = ledger.stream(run_id)
        if events and isinstance(events[-1], ev.RunEnded):
            started = events[0]
            assert isinstance(started, ev.RunStarted) and started.trigger == "heartbeat"
            ended.append((dict(started.payload), events[-1]))
    return ended


def completed(ledger: Ledger, answer: str) -> list[dict[str, Any]]:
    return [
        payload
        for payload, end in beats(ledger)
        if isinstance(end, ev.RunCompleted) and end.answer == answer
    ]


def test_sources_wake_the_agent_and_a_slow_one_is_reported(
    fresh_db: Database, orders: Database, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "clerk-app", config=CONFIG)
    (root / "scripts").mkdir()
    (root / "scripts" / "clerk.json").write_text(json.dumps(SCRIPT))
    config = OwlClawConfig(
        database_url=fresh_db.url,
        database_name=str(fresh_db.params["dbname"]),
        data_dir=str(tmp_path / "data"),
        runtime=RuntimeConfig(placement="local"),
    )

    async def scenario() -> None:
        service = Service(config, [load_app(root)])
        await service.start()
        try:
            assert service.ledger is not None
            ledger = service.ledger

            def skipped() -> list[tuple[dict[str, Any], ev.LedgerEvent]]:
                return [(p, e) for p, e in beats(ledger) if isinstance(e, ev.RunSkipped)]

            await await_for(lambda: len(skipped()) >= 2, "two beats with nothing found", 30)
            for payload, end in skipped():  # no source hit: no model call, the failure shown
                assert "woken_by" not in payload
                [failed] = payload["failed_sources"]
                assert failed["source"] == "slow" and failed["error"] in SLOW_ERRORS
                assert isinstance(end, ev.RunSkipped)
                assert f"source 'slow' failed: {failed['error']}" in end.reason
            assert not completed(ledger, "Handled the new orders.")
            last = service.status()["agents"]["clerk"]["heartbeat_sources"]  # owlclaw status
            assert last["new_orders"] == {"kind": "sql", "count": 0, "error": None}
            assert last["slow"]["error"] in SLOW_ERRORS

            with psycopg.connect(orders.url, autocommit=True) as conn:
                conn.execute("INSERT INTO orders VALUES (1, 'new'), (2, 'new'), (3, 'done')")
            woke = await await_for(
                lambda: completed(ledger, "Handled the new orders."),
                "a beat woken by the count",
                30,
            )
            assert {"source": "new_orders", "kind": "sql", "count": 2} in woke[0]["woken_by"]
            assert [f["source"] for f in woke[0]["failed_sources"]] == ["slow"]

            with psycopg.connect(orders.url, autocommit=True) as conn:
                conn.execute("UPDATE orders SET status = 'done'")
                conn.execute("SELECT pg_notify('order_events', 'order 4 shipped')")
            [heard, *_] = await await_for(
                lambda: completed(ledger, "Saw the order event."), "a beat woken by NOTIFY", 30
            )
            [listen] = [w for w in heard["woken_by"] if w["kind"] == "listen"]
            assert listen == {
                "source": "order_events",
                "kind": "listen",
                "count": 1,
                "payloads": ["order 4 shipped"],
            }
        finally:
            await service.stop()

    asyncio.run(scenario())
