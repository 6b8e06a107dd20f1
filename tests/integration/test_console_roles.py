"""The console's role matrix over HTTP: a viewer, an operator and an approver, each scoped to
``acme.*``, log in with their own tokens; each page and action on an agent in and out of their
scope is served or refused 403 naming the missing role, and a refusal records nothing. The lists
show only the agents in scope, and an approval answered here is recorded by the principal."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path

import httpx
import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.app import load_app
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Result, Submit
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.approvals import HANDLERS
from tests.apps import make_app
from tests.scripted import call
from tests.served import local_service

pytestmark = pytest.mark.integration

IN, OUT = "acme.bot", "globex.bot"
GRANTS = {"viewer-acme": "viewer:acme.*", "operator-acme": "operator:acme.*"}
GRANTS["approver-acme"] = "approver:acme.*"


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


def pages(agent: str, run_id: str, approval: str) -> list[tuple[str, str, str | None, str]]:
    """(method, path, the agent it acts on (None: every agent), the role it needs)."""
    return [
        ("GET", f"/ui/ledger/{agent}", agent, "viewer"),
        ("GET", f"/ui/agents/{agent}/runs", agent, "viewer"),
        ("GET", f"/ui/agents/{agent}/runs/{run_id}", agent, "viewer"),
        ("GET", f"/ui/api/agents/{agent}/runs/{run_id}/events", agent, "viewer"),
        ("GET", f"/ui/memory/{agent}", agent, "viewer"),
        ("GET", f"/ui/schedules/{agent}", agent, "viewer"),
        ("POST", f"/ui/schedules/{agent}/none/cancel", agent, "operator"),
        ("POST", f"/ui/approvals/{approval}", agent, "approver"),
        ("GET", "/ui/overview", None, "viewer"),
        ("GET", "/ui/projections", None, "viewer"),
    ]


def allowed(grant: str, role: str, agent: str | None) -> bool:
    name, _, pattern = grant.partition(":")
    return name == role and (not pattern or agent == IN)


Clients = dict[str, httpx.AsyncClient]


async def refuse_out_of_role(
    clients: Clients, base: str, runs: dict[str, str], approvals: dict[str, str]
) -> list[tuple[str, str, str]]:
    """Every request a principal's grant does not allow is a 403 naming the role; the allowed
    ones, (principal, method, path)."""
    served = []
    for name, grant in GRANTS.items():
        for agent in (IN, OUT):
            for method, path, on, role in pages(agent, runs[agent], approvals[agent]):
                if allowed(grant, role, on):
                    served.append((name, method, path))
                    continue
                form = {"decision": "approve"} if "approvals" in path else {}
                answer = await clients[name].request(
                    method, path, data=form, headers={"Origin": base}
                )
                assert answer.status_code == 403, (name, path, answer.text)
                on_text = "every agent" if on is None else f"agent {on!r}"
                if "/api/" in path:
                    assert answer.json()["role"] == role
                else:
                    assert f"it needs role {role} on {on_text}" in html.unescape(answer.text)
    return served


async def serve_in_role(
    clients: Clients, base: str, served: list[tuple[str, str, str]], digests: dict[str, str]
) -> None:
    for name, method, path in served:
        if "/api/" in path:
            continue  # the parked run's live feed would stream until it ends
        form = {}
        if "approvals/" in path:  # an answer names the digest of the arguments shown
            form = {"decision": "deny", "note": "no", "digest": digests[path.rsplit("/", 1)[1]]}
        answer = await clients[name].request(
            method, path, data=form, headers={"Origin": base}, follow_redirects=False
        )
        assert answer.status_code in (200, 303), (name, path, answer.text)


def test_each_role_on_each_console_page_in_and_out_of_scope(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as led:
        store = PrincipalStore(led)
        tokens = {n: store.add(n, [parse_grant(g)], by="test")[1] for n, g in GRANTS.items()}
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(trader(tmp_path, a)) for a in (IN, OUT)])
    base = f"http://127.0.0.1:{config.server.port}"

    async def logged_in(name: str) -> httpx.AsyncClient:
        http = httpx.AsyncClient(base_url=base, trust_env=False, timeout=30)
        login = await http.post("/ui/login", data={"token": tokens[name]}, headers={"Origin": base})
        assert login.status_code == 303, login.text
        return http

    async def scenario(clients: Clients) -> None:
        ledger = service.ledger
        assert ledger is not None
        runs, approvals, digests = {}, {}, {}
        for agent in (IN, OUT):  # each parks at its order's approval
            runs[agent] = await service.ask(Submit(agent_id=agent, trigger="webhook"))
            parked = await service.ask(Result(agent_id=agent, run_id=runs[agent]))
            assert parked.status == "parked"
        for pending in await asyncio.to_thread(service.pending_approvals):
            approvals[pending.agent_id] = pending.approval_id
            digests[pending.approval_id] = pending.digest

        listed = (await clients["viewer-acme"].get("/ui/")).text
        assert f'data-agent="{IN}"' in listed and f'data-agent="{OUT}"' not in listed
        inbox = (await clients["approver-acme"].get("/ui/approvals")).text
        assert f'action="/ui/approvals/{approvals[IN]}"' in inbox
        assert approvals[OUT] not in inbox

        head = await asyncio.to_thread(ledger.log.last_committed)
        served = await refuse_out_of_role(clients, base, runs, approvals)
        assert await asyncio.to_thread(ledger.log.last_committed) == head  # nothing recorded
        await serve_in_role(clients, base, served, digests)
        stream = ledger.stream(ledger.load_agent(IN).id)
        denied = [(e.approval_id, e.by) for e in stream if isinstance(e, ev.ApprovalDenied)]
        assert denied == [(approvals[IN], "approver-acme")]

    async def main() -> None:
        async with serving(service, config):
            clients = {name: await logged_in(name) for name in GRANTS}
            try:
                await scenario(clients)
            finally:
                for http in clients.values():
                    await http.aclose()

    asyncio.run(main())
