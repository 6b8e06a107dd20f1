"""The webhook's role matrix: each principal's role x each endpoint x an agent in and out of its
scope is served or refused with a JSON 403 naming the missing role, and a refused request
records nothing; an approval answered or a tool switched with a principal's token is recorded as
done by it."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
from tests.approvals import HANDLERS
from tests.apps import make_app
from tests.scripted import call
from tests.served import local_service

pytestmark = pytest.mark.integration

IN, OUT = "acme.bot", "globex.bot"
ROLES = {
    "viewer-acme": "viewer:acme.*",
    "viewer-all": "viewer",
    "operator-acme": "operator:acme.*",
    "approver-acme": "approver:acme.*",
    "admin-all": "admin",
}


def endpoints(agent: str, approval: str) -> list[tuple[str, str, dict[str, object], str, bool]]:
    """(method, path, body, role needed, whether it acts on ``agent`` or the whole server)."""
    fire = {"agent_id": agent, "schedule_id": "none", "fire_time": "2026-01-01T00:00:00Z"}
    return [
        ("POST", f"/agents/{agent}/trigger", {"focus": "buy"}, "operator", True),
        ("POST", f"/agents/{agent}/events", {"payload": {"n": 1}}, "operator", True),
        ("POST", f"/agents/{agent}/tools", {"disable": ["place_order"]}, "operator", True),
        ("POST", f"/agents/{agent}/fires", fire, "operator", True),
        ("POST", f"/approvals/{approval}", {"decision": "deny"}, "approver", True),
        ("GET", "/approvals", {}, "viewer", False),
        ("GET", "/status", {}, "viewer", False),
    ]


def allowed(grant: str, role: str, agent: str, on_agent: bool) -> bool:
    name, _, pattern = grant.partition(":")
    if name != role:
        return False
    return not pattern or (on_agent and agent == IN)


def trader(tmp_path: Path, agent_id: str) -> Path:
    root = make_app(
        tmp_path / agent_id,
        config=f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n'
        '[governance]\nask = ["place_order"]\n',
    )
    (root / "handlers.py").write_text(HANDLERS.format(orders=str(tmp_path / "orders.txt")))
    register_script(
        agent_id,
        [{"tool_calls": [call("place_order", symbol="ACME", amount=5)]}, {"content": "ok"}],
    )
    return root


def test_each_role_on_each_endpoint_in_and_out_of_scope(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as led:
        store = PrincipalStore(led)
        tokens = {n: store.add(n, [parse_grant(g)], by="test")[1] for n, g in ROLES.items()}
    config = local_service(fresh_db, tmp_path, runtime=RuntimeConfig(placement="local"))
    service = Service(config, [load_app(trader(tmp_path, a)) for a in (IN, OUT)])

    async def scenario() -> None:
        ledger = service.ledger
        assert ledger is not None
        base = f"http://127.0.0.1:{config.server.port}"
        admin = {"Authorization": "Bearer test-token"}
        async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=30) as http:
            for agent in (IN, OUT):  # each parks at its order's approval
                started = await http.post(f"/agents/{agent}/trigger", json={}, headers=admin)
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]
                parked = await service.ask(Result(agent_id=agent, run_id=run_id))
                assert parked.status == "parked"
            pending = await asyncio.to_thread(service.pending_approvals)
            approvals = {a.agent_id: a.approval_id for a in pending}

            head = await asyncio.to_thread(ledger.log.head)
            served: list[tuple[str, str, str]] = []
            for name, grant in ROLES.items():
                bearer = {"Authorization": f"Bearer {tokens[name]}"}
                for agent in (IN, OUT):
                    for method, path, body, role, on_agent in endpoints(agent, approvals[agent]):
                        if allowed(grant, role, agent, on_agent):
                            served.append((name, method, path))
                            continue
                        answer = await http.request(method, path, json=body, headers=bearer)
                        assert answer.status_code == 403, (name, path, answer.text)
                        refusal = answer.json()
                        assert refusal["code"] == "forbidden"
                        assert refusal["role"] == role
                        assert f"needs role {role}" in refusal["error"]
                        assert refusal["agent_id"] == (agent if on_agent else None)
            assert await asyncio.to_thread(ledger.log.head) == head  # nothing recorded

            for name, method, path in served:
                bearer = {"Authorization": f"Bearer {tokens[name]}"}
                body = next(b for m, p, b, _, _ in endpoints(IN, approvals[IN]) if p == path)
                answer = await http.request(method, path, json=body, headers=bearer)
                assert answer.status_code in (200, 202), (name, path, answer.text)

            denied = [
                e for e in ledger.stream(ledger.load_agent(IN).id)
                if isinstance(e, ev.ApprovalDenied)
            ]  # fmt: skip
            assert [(d.approval_id, d.by) for d in denied] == [(approvals[IN], "approver-acme")]
            switched = [
                (e.disabled, e.by)
                for e in ledger.stream(ledger.load_agent(IN).id)
                if isinstance(e, ev.ToolsChanged)
            ]
            assert switched == [(["place_order"], "operator-acme")]

            wrong = await http.get("/status", headers={"Authorization": "Bearer owl_nope"})
            assert wrong.status_code == 401

    async def main() -> None:
        async with serving(service, config):
            await scenario()

    asyncio.run(main())
