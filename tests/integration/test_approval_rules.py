"""Approvals a person really gave, through the webhook with real principals: an answer for
other arguments than those shown is 409 ``digest_mismatch``, a principal named like the agent or
one of its sub-agents is 403 ``self_approval``, a tool needing two approvers stays parked after
one grant, the same approver twice is 409 ``same_approver``, the second approver's grant runs
the call once, and a grant answered again is 409 ``approval_closed``. No refusal records
anything."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import UUID

import httpx
import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.app import load_app
from owlclaw.config import RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Result
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from projections import AuditView
from tests.approvals import HANDLERS
from tests.apps import make_app
from tests.scripted import call
from tests.served import local_service
from tests.waiting import await_for

pytestmark = pytest.mark.integration

Answer = Callable[[str, str, str], Awaitable[httpx.Response]]
"""(principal, "approve" | "deny", digest) -> the webhook's answer."""
AGENT, SUB_AGENT = "acme.desk", "acme.desk.sub-1"
PRINCIPALS = {
    "alice": "approver:acme.*",
    "bob": "approver",
    AGENT: "approver:acme.*",  # a principal named like the agent
    SUB_AGENT: "approver",  # and like its sub-agent
}


def desk(tmp_path: Path) -> tuple[Path, Path]:
    orders = tmp_path / "orders.txt"
    root = make_app(
        tmp_path / AGENT,
        config=f'[agent]\nid = "{AGENT}"\nmodels = ["scripted/{AGENT}"]\n'
        '[governance]\nask = ["place_order"]\napprovals_required = { place_order = 2 }\n',
    )
    (root / "handlers.py").write_text(HANDLERS.format(orders=str(orders)))
    register_script(
        AGENT, [{"tool_calls": [call("place_order", symbol="ACME", amount=5)]}, {"content": "ok"}]
    )
    return root, orders


def grants(ledger: Ledger) -> list[tuple[str, int]]:
    """(by, grants still awaited) of each ApprovalGranted of the agent."""
    events = ledger.stream(ledger.load_agent(AGENT).id)
    return [(e.by, e.awaiting) for e in events if isinstance(e, ev.ApprovalGranted)]


async def audited_approvers(service: Service, run_id: str) -> str:
    """Who granted the run's approval, as the audit view says once it has the last grant."""
    audit = service.view(AuditView)

    def answered() -> str | None:
        rows = list(audit.approval_answers(UUID(run_id)).values())  # none until it has the request
        return rows[0].by if rows and rows[0].status == "granted" else None

    return await await_for(answered, "the audit view's answer")


async def refused(answer: Answer, digest: str) -> None:
    """Other arguments than those shown, and the agent or its sub-agent answering."""
    stale = await answer("alice", "approve", "0" * 64)
    assert (stale.status_code, stale.json()["code"]) == (409, "digest_mismatch")
    assert digest in stale.json()["error"]
    for agent_named in (AGENT, SUB_AGENT):
        for decision in ("approve", "deny"):
            itself = await answer(agent_named, decision, digest)
            assert itself.status_code == 403, itself.text
            assert itself.json()["code"] == "self_approval"


def test_digest_self_approval_and_two_approvers_through_the_webhook(
    fresh_db: Database, tmp_path: Path
) -> None:
    root, orders = desk(tmp_path)
    with Ledger(fresh_db.url) as led:
        store = PrincipalStore(led)
        tokens = {n: store.add(n, [parse_grant(g)], by="test")[1] for n, g in PRINCIPALS.items()}
        led.register_agent(AGENT, str(root))
        led.register_agent(SUB_AGENT, str(root), parent_agent_id=AGENT, depth=1)
    config = local_service(fresh_db, tmp_path, runtime=RuntimeConfig(placement="local"))
    service = Service(config, [load_app(root)])

    def bearer(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[name]}"}

    async def scenario() -> None:
        ledger = service.ledger
        assert ledger is not None
        base = f"http://127.0.0.1:{config.server.port}"
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=30) as http:
            admin = {"Authorization": "Bearer test-token"}
            started = await http.post(f"/agents/{AGENT}/trigger", json={}, headers=admin)
            run_id = started.json()["run_id"]
            assert (await service.ask(Result(agent_id=AGENT, run_id=run_id))).status == "parked"
            [shown] = (await http.get("/approvals", headers=admin)).json()
            assert shown["approvals_required"] == 2 and shown["granted_by"] == []
            path, digest = f"/approvals/{shown['approval_id']}", shown["digest"]

            async def answer(name: str, decision: str, digest: str) -> httpx.Response:
                body = {"decision": decision, "digest": digest}
                return await http.post(path, json=body, headers=bearer(name))

            head = await asyncio.to_thread(ledger.log.last_committed)
            await refused(answer, digest)
            assert await asyncio.to_thread(ledger.log.last_committed) == head  # nothing recorded

            first = await answer("alice", "approve", digest)
            assert first.status_code == 200, first.text
            assert (first.json()["status"], first.json()["granted_by"]) == ("pending", ["alice"])
            parked = await asyncio.to_thread(ledger.load_run, UUID(run_id))
            assert parked.state.status == "parked" and not orders.exists()
            head = await asyncio.to_thread(ledger.log.last_committed)
            again = await answer("alice", "approve", digest)
            assert (again.status_code, again.json()["code"]) == (409, "same_approver")
            assert await asyncio.to_thread(ledger.log.last_committed) == head

            second = await answer("bob", "approve", digest)
            assert second.status_code == 200, second.text
            assert second.json()["status"] == "granted"
            result = await service.ask(Result(agent_id=AGENT, run_id=run_id))
            assert result.status == "completed"
            replayed = await answer("bob", "approve", digest)
            assert (replayed.status_code, replayed.json()["code"]) == (409, "approval_closed")

            assert await asyncio.to_thread(grants, ledger) == [("alice", 1), ("bob", 0)]
            assert await audited_approvers(service, run_id) == "alice, bob"
        assert orders.read_text() == "ACME 5.0\n"  # the call ran once

    async def main() -> None:
        async with serving(service, config):
            await scenario()

    asyncio.run(main())
