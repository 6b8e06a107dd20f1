"""Many registered agents: batch registration, the agents view a page at a time, the console's
agents page and ``owlclaw status`` over them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from events import Ledger
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.server.overview import agent_overviews
from owlclaw.server.service import Service
from projections import AgentsView, ProjectionRunner
from tests.browser import scripted_app
from tests.cli import owlclaw

pytestmark = pytest.mark.integration


def names(count: int, prefix: str = "agent") -> list[str]:
    return [f"{prefix}-{i:04d}" for i in range(count)]


def test_batch_registration_registers_the_new_ones_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("events.ledger.REGISTER_BATCH", 64)
    earlier = ledger.register_agent("agent-0007")
    wanted = names(200)
    assert ledger.register_agents(wanted, app_dir="/apps/x") == 199
    assert ledger.register_agents(wanted) == 0  # idempotent
    assert ledger.load_agent("agent-0007").version == earlier.version
    assert ledger.load_agent("agent-0150").state.app_dir == "/apps/x"
    assert sorted(ledger.agent_ids()) == wanted
    report = ledger.chains.verify()
    assert report.ok and report.streams == 200


def test_the_agents_view_pages_through_every_agent_once_in_id_order(ledger: Ledger) -> None:
    wanted = names(250)
    ledger.register_agents(wanted[::-1])
    view = AgentsView(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    seen, after = [], None
    while page := view.page(after, 100):
        seen += [row.agent_id for row in page]
        after = page[-1].agent_id
    assert seen == wanted
    assert view.count() == 250
    assert [r.agent_id for r in view.page("agent-0247", 100)] == ["agent-0248", "agent-0249"]
    with pytest.raises(ValueError, match="1 to 500"):
        view.page(None, 501)


def test_the_agents_page_lists_served_and_passivated_agents_a_page_at_a_time(
    fresh_db: Database, tmp_path: Path
) -> None:
    config = OwlClawConfig(
        database_url=fresh_db.url,
        database_name=str(fresh_db.params["dbname"]),
        data_dir=str(tmp_path / "data"),
        runtime=RuntimeConfig(placement="local"),
    )
    app = load_app(scripted_app(tmp_path / "desk", "agent-0100-desk", [{"content": "done"}]))
    registered = names(230)

    async def scenario() -> list[list[tuple[str, str, bool]]]:
        service = Service(config, [app])
        await service.start()
        try:
            assert service.ledger is not None
            await asyncio.to_thread(service.ledger.register_agents, registered)
            pages, after = [], None
            while True:
                page = await agent_overviews(service, after, 100)
                assert page.registered == 231
                pages.append([(a.agent_id, str(a.state), a.served) for a in page.agents])
                if page.next_after is None:
                    return pages
                after = page.next_after
        finally:
            await service.stop()

    pages = asyncio.run(scenario())
    assert [len(p) for p in pages] == [100, 100, 31]
    rows = [row for page in pages for row in page]
    assert [agent_id for agent_id, _, _ in rows] == sorted([*registered, "agent-0100-desk"])
    assert ("agent-0100-desk", "idle", True) in rows
    assert all(
        (state, served) == ("passivated", False) for a, state, served in rows if "desk" not in a
    )


def test_status_counts_every_registered_agent(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        ledger.register_agents(names(120))
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
        "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
    }
    result = owlclaw(env, "status", "--json", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["registered_agents"] == 120
    assert report["agents"] == []  # none has run, none is served
    assert "registered_agents_behind" not in report
