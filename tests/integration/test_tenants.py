"""Tenant limits on PostgreSQL, held across hosts: each host below has a ledger of its own on
one database, as the hosts of two processes or nodes do."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.directory import AgentDirectory
from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.compose.read import open_view
from owlclaw.config import OwlClawConfig, RuntimeConfig, TenantConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Activate, Result, RunResult, Submit, SubmitAndWait
from projections import ProjectionRunner, RunsView
from tests.scripted import agent_events, decide, run_events
from tests.tenancy import Priced, with_tenants

pytestmark = pytest.mark.integration


@pytest.fixture
def second_ledger(fresh_db: Database) -> Iterator[Ledger]:
    """Another process's ledger on the same database."""
    with Ledger(fresh_db.url) as led:
        yield led


async def run_on(host: AgentHost, agent_id: str) -> RunResult:
    run_id = await host.ask(Submit(agent_id=agent_id, trigger="webhook"))
    return await host.ask(Result(agent_id=agent_id, run_id=run_id))


def test_agents_of_a_tenant_on_two_hosts_together_exhaust_its_daily_budget(
    ledger: Ledger, second_ledger: Ledger
) -> None:
    # every model answer costs 0.4; acme may spend 1.0 a day, no agent has a budget of its own
    register_script("tenant-spends", [decide(1), {"content": "done"}])
    config = with_tenants(
        "scripted/tenant-spends",
        acme=TenantConfig(agents="acme.*", daily_cost_usd=1.0),
        zeta=TenantConfig(agents="zeta.*", daily_cost_usd=5.0),
    )
    ledger.register_agents(["acme.a", "acme.b", "zeta.a"])
    runs = ProjectionRunner(ledger, open_view(ledger, config, RunsView))

    async def scenario() -> tuple[RunResult, RunResult, RunResult]:
        one = AgentHost(ledger, config, llm=Priced(0.4))
        other = AgentHost(second_ledger, config, llm=Priced(0.4))
        first = await run_on(one, "acme.a")  # 0.8 spent
        await asyncio.to_thread(runs.catch_up)  # the service's runs projection
        second = await run_on(other, "acme.b")  # 0.8 before its first call, 1.2 before the next
        third = await run_on(other, "zeta.a")
        await one.close()
        await other.close()
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert (first.status, first.iterations) == ("completed", 2)
    assert (second.status, second.iterations) == ("terminated", 1)
    [exceeded] = [e for e in agent_events(ledger, "acme.b") if isinstance(e, ev.BudgetExceeded)]
    assert (exceeded.budget, exceeded.limit) == ("tenant:acme.daily_cost_usd", 1.0)
    assert exceeded.spent == pytest.approx(1.2)
    assert str(exceeded.run_id) == second.run_id
    [ended] = [e for e in run_events(ledger, second) if isinstance(e, ev.RunTerminated)]
    assert ended.reason.startswith("tenant:acme.daily_cost_usd budget exceeded: spent 1.2 of 1")
    assert (third.status, third.iterations) == ("completed", 2)  # zeta's budget is its own


def test_a_tenant_capped_at_one_run_runs_its_agents_one_at_a_time_across_hosts(
    ledger: Ledger, second_ledger: Ledger
) -> None:
    register_script("tenant-capped", [decide(1), decide(2), decide(3), {"content": "done"}])
    config: OwlClawConfig = with_tenants(
        "scripted/tenant-capped", acme=TenantConfig(agents="acme.*", max_concurrent_runs=1)
    )
    agents = ["acme.a", "acme.b", "acme.c", "acme.d"]
    ledger.register_agents(agents)

    async def scenario() -> list[RunResult]:
        hosts = [AgentHost(ledger, config), AgentHost(second_ledger, config)]
        results = await asyncio.gather(
            *(run_on(hosts[i % 2], agent) for i, agent in enumerate(agents))
        )
        for host in hosts:
            await host.close()
        return list(results)

    assert [r.status for r in asyncio.run(scenario())] == ["completed"] * 4
    order = started_and_ended(ledger)
    assert [kind for kind, _ in order] == ["RunStarted", "RunCompleted"] * 4
    assert all(order[i][1] == order[i + 1][1] for i in range(0, 8, 2))  # each its own start


def started_and_ended(ledger: Ledger) -> list[tuple[str, uuid.UUID]]:
    """Each run's start and end, in the ledger's global order."""
    return [
        (type(e.event).__name__, e.event.originator_id)
        for e in ledger.log.read(0, limit=10_000)
        if isinstance(e.event, ev.RunStarted | ev.RunCompleted)
    ]


@pytest.mark.xdist_group("ray")
def test_a_capped_tenants_agents_in_their_own_ray_actors_run_one_at_a_time(
    ray_cluster: None, ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    # dedicated placement: each agent in an actor process of its own, each process its slots
    decide = {"name": "log_decision", "arguments": {"reasoning": "ok", "decision_type": "other"}}
    steps = [{"tool_calls": [decide]}, {"content": "done"}]
    (tmp_path / "paced.json").write_text(json.dumps({"steps": steps, "latency_s": 0.5}))
    config = OwlClawConfig(
        database_url=fresh_db.url,
        database_name=str(fresh_db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/paced",), scripts_dir=str(tmp_path)),
        tenants={"acme": TenantConfig(agents="acme.*", max_concurrent_runs=1)},
    )
    agents = [f"acme.{uuid.uuid4().hex[:8]}" for _ in range(2)]
    ledger.register_agents(agents)
    directory = AgentDirectory(ledger, config, placement="dedicated")

    async def at_once() -> list[RunResult]:
        await asyncio.gather(*(directory.ask(Activate(agent_id=a)) for a in agents))
        try:
            return list(
                await asyncio.gather(
                    *(directory.ask(SubmitAndWait(agent_id=a, trigger="webhook")) for a in agents)
                )
            )
        finally:
            await directory.close()

    assert [r.status for r in asyncio.run(at_once())] == ["completed"] * 2
    order = started_and_ended(ledger)
    assert [kind for kind, _ in order] == ["RunStarted", "RunCompleted"] * 2
    assert order[0][1] == order[1][1] and order[2][1] == order[3][1]
