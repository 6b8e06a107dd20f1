"""The `owlclaw run` service in-process (agents hosted locally, built-in timers): heartbeats are
skipped while nothing is pending and act on an inbound event; a served app's agent is the one
its owlclaw.toml names; agents it does not serve are refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.messages import Receive, Submit
from owlclaw.server.service import NotServed, Service
from tests.apps import make_app
from tests.waiting import await_for

pytestmark = pytest.mark.integration

SCRIPT = json.dumps(
    {
        "steps": [
            {
                "tool_calls": [
                    {
                        "name": "log_decision",
                        "arguments": {"reasoning": "acted on the event", "decision_type": "other"},
                    }
                ]
            },
            {"content": "done"},
        ]
    }
)


def served_app(tmp_path: Path) -> Path:
    root = make_app(
        tmp_path / "watcher-app",
        config='[agent]\nid = "watcher"\nmodels = ["scripted/watcher"]\nheartbeat_s = 0.3\n',
    )
    (root / "scripts").mkdir()
    (root / "scripts" / "watcher.json").write_text(SCRIPT)
    return root


def runs(ledger: Ledger, agent_id: str) -> list[list[ev.LedgerEvent]]:
    """The agent's started runs' events (a run only queued has none yet)."""
    return [s for run_id in ledger.list_runs(agent_id) if (s := ledger.stream(run_id))]


def test_heartbeats_skip_until_an_inbound_event_arrives(fresh_db: Database, tmp_path: Path) -> None:
    config = OwlClawConfig(
        database_url=fresh_db.url,
        database_name=str(fresh_db.params["dbname"]),
        data_dir=str(tmp_path / "data"),
        runtime=RuntimeConfig(placement="local"),
    )
    app = load_app(served_app(tmp_path))
    assert app.agent_id == "watcher"

    async def scenario() -> None:
        service = Service(config, [app])
        await service.start()
        try:
            assert service.ledger is not None
            ledger = service.ledger

            def ended(kind: type[ev.LedgerEvent], count: int) -> Callable[[], bool]:
                def check() -> bool:
                    beats = runs(ledger, "watcher")
                    return sum(isinstance(r[-1], kind) for r in beats) >= count

                return check

            await await_for(ended(ev.RunSkipped, 2), "two heartbeats skipped", timeout_s=10)
            with pytest.raises(NotServed):
                await service.ask(Submit(agent_id="someone-else", trigger="webhook"))
            await service.ask(Receive(agent_id="watcher", source="webhook", payload={"order": 7}))
            await await_for(ended(ev.RunCompleted, 1), "a heartbeat acting on the event", 10)
            beats = runs(ledger, "watcher")
            started = [r[0] for r in beats]
            assert all(isinstance(s, ev.RunStarted) and s.trigger == "heartbeat" for s in started)
            skipped = [r for r in beats if isinstance(r[-1], ev.RunSkipped)]
            acted = [r for r in beats if isinstance(r[-1], ev.RunCompleted)]
            assert len(skipped) >= 2 and len(acted) == 1
            assert not any(isinstance(e, ev.LLMResponded) for r in skipped for e in r)
            [decision] = [e for e in acted[0] if isinstance(e, ev.DecisionLogged)]
            assert decision.reasoning == "acted on the event"
            assert service.status()["agents"]["watcher"]["heartbeat_s"] == 0.3
        finally:
            await service.stop()

    asyncio.run(scenario())
    with Ledger(fresh_db.url) as ledger:
        agent = ledger.load_agent("watcher")
        assert agent.state.app_dir == str(tmp_path / "watcher-app")
