"""Tenants: their configuration, which tenant an agent is in, the spending arithmetic, and
both limits on the in-memory ledger (tests/integration/test_tenants.py: on PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.cli import app as cli
from owlclaw.cli.common import EXIT_CONFIG
from owlclaw.config import ConfigError, TenantConfig, load_config
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Result, RunResult, Submit
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tenants import DaySpending, Tenant, TenantConflict, TenantLimits, Tenants
from owlclaw.tenants.slots import LocalSlots
from owlclaw.tenants.spending import TenantSpending, ledger_source
from projections.runs import RunCost
from tests.apps import make_app
from tests.scripted import agent_events, decide, play, run_events
from tests.tenancy import Priced, with_tenants

ACME = Tenant("acme", TenantConfig(agents="acme.*", daily_cost_usd=1.0))


def test_tenants_load_from_the_server_configuration(tmp_path: Path) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text(
        '[tenants.acme]\nagents = "acme.*"\ndaily_cost_usd = 5.0\nmax_concurrent_runs = 3\n'
    )
    acme = load_config(toml, environ={}).tenants["acme"]
    assert (acme.agents, acme.daily_cost_usd, acme.max_concurrent_runs) == ("acme.*", 5.0, 3)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[tenants.acme]\nagents = "acme/*"\n', r"\[tenants\] acme: agents = 'acme/\*': 1-128"),
        ("[tenants.acme]\ndaily_cost_usd = 1.0\n", "agents"),
        ('[tenants.acme]\nagents = "acme.*"\ndaily_cost_usd = 0\n', "daily_cost_usd"),
        ('[tenants.acme]\nagents = "acme.*"\nmax_concurrent_runs = 0\n', "max_concurrent_runs"),
        ('[tenants.acme]\nagents = "acme.*"\nmax_runs = 2\n', "max_runs"),
        ('[tenants."a c"]\nagents = "acme.*"\n', "tenants"),
    ],
)
def test_a_malformed_tenant_is_refused_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_config(toml, environ={})


def test_an_agent_in_two_tenants_is_refused_naming_both() -> None:
    tenants = Tenants({"acme": TenantConfig(agents="acme.*"), "bots": TenantConfig(agents="*.bot")})
    assert tenants.of("acme.sales").name == "acme"  # type: ignore[union-attr]
    assert tenants.of("other") is None
    with pytest.raises(TenantConflict, match=r"'acme\.bot'.*'acme'.*'bots'"):
        tenants.check_served(["acme.sales", "acme.bot"])
    assert tenants.check_served(["acme.sales"]) == [
        "tenant 'bots': agents = '*.bot' matches no served agent"
    ]


costs = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(
    ended=st.lists(st.tuples(st.sampled_from(["acme.a", "acme.b", "zeta"]), costs)),
    running=st.lists(st.tuples(st.sampled_from(["acme.a", "zeta"]), costs), min_size=1),
    own=costs,
)
def test_a_run_counts_the_tenants_other_runs_and_its_own_cost_now(
    ended: list[tuple[str, float]], running: list[tuple[str, float]], own: float
) -> None:
    rows = [RunCost(agent, None, cost) for agent, cost in ended]
    ids = [uuid.uuid4() for _ in running]
    rows += [RunCost(agent, i, cost) for i, (agent, cost) in zip(ids, running, strict=True)]
    spending = DaySpending.of(ACME, date(2026, 1, 1), rows)
    this = ids[0]  # as the view last saw it: its cost counts as of now instead
    others = sum(c for i, (a, c) in zip(ids, running, strict=True) if a == "acme.a" and i != this)
    expected = sum(c for a, c in ended if a != "zeta") + others + own
    assert spending.total(this, own) == pytest.approx(expected)


def test_spending_is_read_again_when_stale_or_on_a_new_day() -> None:
    reads: list[date] = []
    clock = [0.0]

    def source(day: date) -> list[RunCost]:
        reads.append(day)
        return [RunCost("acme.a", None, float(len(reads)))]

    spending = TenantSpending(source, refresh_s=2.0, clock=lambda: clock[0])
    day = date(2026, 1, 1)
    assert spending.today(ACME, day).ended == 1.0
    clock[0] = 1.9
    assert spending.today(ACME, day).ended == 1.0
    clock[0] = 2.0
    assert spending.today(ACME, day).ended == 2.0
    assert spending.today(ACME, date(2026, 1, 2)).ended == 3.0


def test_agents_of_a_tenant_together_exhaust_its_budget(ledger: Ledger) -> None:
    # each model answer costs 0.4; the tenant may spend 1.0 a day, neither agent has a budget
    spending = TenantSpending(ledger_source(ledger), refresh_s=0)  # no copy kept: exact
    limits = TenantLimits(Tenants({"acme": ACME.config}), spending, LocalSlots())

    def runtime(agent_id: str) -> AgentRuntime:
        return AgentRuntime(
            ledger,
            agent_id,
            models=["x"],
            llm=Priced(0.4),
            tenant_budget=limits.budget_of(agent_id),
        )

    first = play(runtime("acme.a"), [decide(1), decide(2), {"content": "ok"}])
    assert first.status == "completed"  # 1.2 spent: its last call began at 0.8
    second = play(runtime("acme.b"), [decide(1), {"content": "ok"}])
    assert second.status == "terminated" and second.iterations == 0
    [exceeded] = [e for e in agent_events(ledger, "acme.b") if isinstance(e, ev.BudgetExceeded)]
    assert (exceeded.budget, exceeded.limit) == ("tenant:acme.daily_cost_usd", 1.0)
    assert exceeded.spent == pytest.approx(1.2)
    [ended] = [e for e in run_events(ledger, second) if isinstance(e, ev.RunTerminated)]
    assert "tenant:acme.daily_cost_usd budget exceeded" in ended.reason
    other = play(runtime("zeta"), [decide(1), decide(2), decide(3), {"content": "ok"}])
    assert other.status == "completed"


def test_local_slots_let_one_run_at_a_time() -> None:
    tenant = Tenant("acme", TenantConfig(agents="acme.*", max_concurrent_runs=1))
    slots, order = LocalSlots(), []

    async def run(name: str, started: asyncio.Event, release: asyncio.Event) -> None:
        async with slots.hold(tenant):
            order.append(f"{name} starts")
            started.set()
            await release.wait()
            order.append(f"{name} ends")

    async def scenario() -> None:
        a_started, b_started, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(run("a", a_started, release))
        await a_started.wait()
        b = asyncio.create_task(run("b", b_started, release))
        await asyncio.sleep(0)  # b is waiting for the slot
        assert not b_started.is_set()
        release.set()
        await asyncio.gather(a, b)

    asyncio.run(scenario())
    assert order == ["a starts", "a ends", "b starts", "b ends"]


def test_a_hosted_tenant_capped_at_one_run_runs_its_agents_one_after_the_other(
    ledger: Ledger,
) -> None:
    register_script("capped", [decide(1), decide(2), {"content": "done"}])
    capped = TenantConfig(agents="acme.*", max_concurrent_runs=1)
    ledger.register_agents(["acme.a", "acme.b"])

    async def scenario() -> list[str]:
        host = AgentHost(ledger, with_tenants("scripted/capped", acme=capped))
        ids = await asyncio.gather(
            *(host.ask(Submit(agent_id=a, trigger="webhook")) for a in ("acme.a", "acme.b"))
        )
        results = [
            await host.ask(Result(agent_id=a, run_id=r))
            for a, r in zip(("acme.a", "acme.b"), ids, strict=True)
        ]
        await host.close()
        return [r.status for r in results]

    assert asyncio.run(scenario()) == ["completed", "completed"]
    starts_and_ends = [
        type(e.event).__name__
        for e in ledger.log.read(0, limit=10_000)
        if isinstance(e.event, ev.RunStarted | ev.RunCompleted)
    ]
    assert starts_and_ends == ["RunStarted", "RunCompleted"] * 2


def test_a_parked_run_gives_its_slot_back(ledger: Ledger, tmp_path: Path) -> None:
    register_script("parks", [decide(1), {"content": "done"}])
    app = make_app(tmp_path / "asks", config='[governance]\nask = ["log_decision"]\n')
    ledger.register_agent("acme.asks", str(app))
    ledger.register_agent("acme.next")
    capped = TenantConfig(agents="acme.*", max_concurrent_runs=1)

    async def scenario() -> list[str]:
        host = AgentHost(ledger, with_tenants("scripted/parks", acme=capped))
        parked = await run_on(host, "acme.asks")  # waits for a person's approval
        after = await asyncio.wait_for(run_on(host, "acme.next"), 60)  # a slot is free
        await host.close()
        return [parked.status, after.status]

    assert asyncio.run(scenario()) == ["parked", "completed"]


async def run_on(host: AgentHost, agent_id: str) -> RunResult:
    run_id = await host.ask(Submit(agent_id=agent_id, trigger="webhook"))
    return await host.ask(Result(agent_id=agent_id, run_id=run_id))


def test_owlclaw_run_refuses_a_served_agent_in_two_tenants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text('[tenants.acme]\nagents = "acme.*"\n[tenants.bots]\nagents = "*.bot"\n')
    monkeypatch.setenv("OWLCLAW_CONFIG", str(toml))
    app = make_app(tmp_path / "acme.bot")
    refused = CliRunner().invoke(cli, ["run", str(app)])
    assert refused.exit_code == EXIT_CONFIG
    assert "agent 'acme.bot' is in two tenants: 'acme'" in refused.output
    assert "and 'bots' (agents = '*.bot')" in refused.output
    assert "Traceback" not in refused.output
