"""The agent of the approval tests: its order tool asks for approval under the governance a
test gives, one host runs it until it parks, another resumes it once answered."""

from __future__ import annotations

from pathlib import Path

from actors.host import AgentHost
from events import Ledger
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Result, RunResult, Submit
from owlclaw.reports.approvals import pending
from tests.apps import make_app
from tests.scripted import call

HANDLERS = """
from pathlib import Path
from owlclaw import Registry

registry = Registry()


@registry.capability("Place an order.")
def place_order(symbol: str, amount: float) -> dict:
    with Path({orders!r}).open("a") as f:
        f.write(f"{{symbol}} {{amount}}\\n")
    return {{"placed": symbol, "amount": amount}}
"""


def trader(tmp_path: Path, agent_id: str, governance: str) -> tuple[str, Path]:
    orders = tmp_path / f"{agent_id}-orders.txt"
    root = make_app(tmp_path / agent_id, config=f"[governance]\n{governance}\n")
    (root / "handlers.py").write_text(HANDLERS.format(orders=str(orders)))
    register_script(
        agent_id,
        [{"tool_calls": [call("place_order", symbol="ACME", amount=5000)]}, {"content": "ok"}],
    )
    return str(root), orders


def config(agent_id: str) -> OwlClawConfig:
    return OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{agent_id}",)))


async def park(ledger: Ledger, agent_id: str) -> tuple[str, str]:
    """Run the agent until it parks; (run id, approval id). The host then stops."""
    host = AgentHost(ledger, config(agent_id))
    try:
        run_id = await host.ask(Submit(agent_id=agent_id, trigger="webhook", focus="buy ACME"))
        result = await host.ask(Result(agent_id=agent_id, run_id=run_id))
    finally:
        await host.close()
    assert result.status == "parked"
    [approval] = pending(ledger, [agent_id])
    assert approval.run_id == run_id and approval.tool == "place_order"
    return run_id, approval.approval_id


async def resumed(ledger: Ledger, agent_id: str, run_id: str) -> RunResult:
    """A new host activates the agent: an answered parked run resumes first."""
    host = AgentHost(ledger, config(agent_id))
    try:
        return await host.ask(Result(agent_id=agent_id, run_id=run_id))
    finally:
        await host.close()


def digest_of(ledger: Ledger, agent_id: str, approval_id: str) -> str:
    """The digest an answer to the approval must name: of the arguments it shows now."""
    return ledger.load_agent(agent_id).state.approvals[approval_id].shown()[1]
