"""Who may do what, over one served instance: each principal (viewer, operator, approver, admin,
scoped to ``acme.*`` or not; the server token; no token; a revoked token) x each endpoint (the
webhook's routes, the CLI's recall and verify among them, /metrics, MCP tool calls, A2A send /
get / cancel, the CLI through the server) x an agent in and out of its scope is served, or
refused: a JSON 403 naming the missing role (an MCP tool error naming it), 401 without a live
token, and the ledger's head unchanged by each refusal. A list of every agent's (status,
approvals) is filtered to the principal's agents, and an approval answered by a principal,
through the webhook or MCP, is recorded as answered by it."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import msgspec
import pytest
from a2a.utils.constants import VERSION_HEADER

from events import Ledger
from events import catalog as ev
from owlclaw.access.authorize import BOOTSTRAP
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.app import load_app
from owlclaw.client import ServerClient, ServerRefused
from owlclaw.config import OwlClawConfig
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
SERVER_TOKEN = "test-token"
GRANTS = {
    "viewer-acme": "viewer:acme.*",
    "viewer-all": "viewer",
    "operator-acme": "operator:acme.*",
    "approver-acme": "approver:acme.*",
    "admin-all": "admin",
}
REFUSED = re.compile(r"needs role (\w+) on (?:agent '([^']+)'|some agent|every agent)$")
MCP_ACCEPT = "application/json, text/event-stream"


class Outcome(NamedTuple):
    kind: str
    """allowed, refused (403 / a tool error naming the role) or unauthorized (401)."""
    role: str | None = None
    agent_id: str | None = None
    detail: str = ""


def answered(response: httpx.Response) -> Outcome:
    if response.status_code == 401:
        return Outcome("unauthorized")
    if response.status_code == 403:
        body = response.json()
        assert body["code"] == "forbidden" and f"needs role {body['role']}" in body["error"]
        return Outcome("refused", body["role"], body["agent_id"])
    return Outcome("allowed", detail=f"{response.status_code} {response.text}")


Send = Callable[[httpx.AsyncClient, dict[str, str], str], Awaitable[Outcome]]
"""A call of an endpoint on an agent with the given headers."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    role: str
    scope: str
    """agent: acts on the agent; list: every agent's, filtered; server: the whole server's."""
    send: Send
    ok: Callable[[Outcome], bool]


def http_ok(*statuses: int) -> Callable[[Outcome], bool]:
    return lambda outcome: int(outcome.detail.split()[0]) in statuses


def webhook(method: str, path: str, body: Callable[[str], dict[str, Any]] = lambda _: {}) -> Send:
    async def send(http: httpx.AsyncClient, headers: dict[str, str], agent: str) -> Outcome:
        target = path.format(agent=agent, approval=APPROVALS[agent][0])
        return answered(await http.request(method, target, json=body(agent), headers=headers))

    return send


def mcp(tool: str, arguments: Callable[[str], dict[str, Any]]) -> Send:
    async def send(http: httpx.AsyncClient, headers: dict[str, str], agent: str) -> Outcome:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments(agent)},
        }
        response = await http.post("/mcp", json=request, headers=headers | {"Accept": MCP_ACCEPT})
        if response.status_code != 200:
            return answered(response)
        result = response.json()["result"]
        text = " ".join(c.get("text", "") for c in result["content"])
        refused = REFUSED.search(text) if result.get("isError") else None
        if refused is None:
            return Outcome("allowed", detail=text if result.get("isError") else "ok")
        return Outcome("refused", refused[1], refused[2])

    return send


def mcp_ok(outcome: Outcome) -> bool:
    return outcome.detail == "ok" or "is already" in outcome.detail  # answered before


def a2a(method: str, params: Callable[[str], dict[str, Any]]) -> Send:
    async def send(http: httpx.AsyncClient, headers: dict[str, str], agent: str) -> Outcome:
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params(agent)}
        version = {VERSION_HEADER: "0.3"}  # 0.3's method names
        return answered(await http.post(f"/a2a/{agent}", json=request, headers=headers | version))

    return send


def a2a_message(_: str) -> dict[str, Any]:
    message = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": "look"}],
    }
    return {"message": message, "configuration": {"blocking": False}}


def a2a_result(outcome: Outcome) -> bool:
    return outcome.detail.startswith("200 ") and '"result"' in outcome.detail


APPROVALS: dict[str, list[str]] = {}
DIGESTS: dict[str, str] = {}
"""Each approval's digest, which an answer names."""
"""Each agent's pending approvals, set once its runs have parked: the webhook answers the first,
MCP the last."""
RUNS: dict[str, str] = {}
"""A parked run of each agent: the task A2A reads and cancels."""


def fire(agent: str) -> dict[str, Any]:
    return {"agent_id": agent, "schedule_id": "none", "fire_time": "2026-01-01T00:00:00Z"}


ENDPOINTS = [
    Endpoint(
        "trigger", "operator", "agent",
        webhook("POST", "/agents/{agent}/trigger", lambda _: {"focus": "look"}), http_ok(202),
    ),
    Endpoint(
        "events", "operator", "agent",
        webhook("POST", "/agents/{agent}/events", lambda _: {"payload": {"n": 1}}), http_ok(202),
    ),
    Endpoint(
        "tools", "operator", "agent",
        webhook("POST", "/agents/{agent}/tools", lambda _: {"enable": ["place_order"]}),
        http_ok(200),
    ),
    Endpoint(
        "fires", "operator", "agent",
        webhook("POST", "/agents/{agent}/fires", fire), http_ok(200),
    ),
    Endpoint(
        "activate", "operator", "agent",
        webhook("POST", "/agents/{agent}/activate"), http_ok(200),
    ),
    Endpoint(
        "answer", "approver", "agent",
        webhook(
            "POST",
            "/approvals/{approval}",
            lambda a: {"decision": "deny", "digest": DIGESTS[APPROVALS[a][0]]},
        ),
        http_ok(200, 409),
    ),
    Endpoint("approvals", "viewer", "list", webhook("GET", "/approvals"), http_ok(200)),
    Endpoint("status", "viewer", "list", webhook("GET", "/status"), http_ok(200)),
    Endpoint("metrics", "viewer", "server", webhook("GET", "/metrics"), http_ok(200)),
    Endpoint(
        "memory", "viewer", "agent",
        webhook("GET", "/agents/{agent}/memory?recall=orders&k=3"), http_ok(200),
    ),
    Endpoint(
        "verify", "viewer", "agent",
        webhook("POST", "/agents/{agent}/runs/1/verify"), http_ok(200),
    ),
    Endpoint("runs", "viewer", "agent", webhook("GET", "/agents/{agent}/runs"), http_ok(200)),
    Endpoint(
        "ledger", "viewer", "agent", webhook("GET", "/agents/{agent}/ledger?limit=5"), http_ok(200)
    ),
    Endpoint(
        "explain", "viewer", "agent",
        webhook("GET", "/agents/{agent}/runs/1/manifest"), http_ok(200),
    ),
    Endpoint(
        "agent schedules", "viewer", "agent",
        webhook("GET", "/agents/{agent}/schedules"), http_ok(200),
    ),
    Endpoint("schedules", "viewer", "list", webhook("GET", "/schedules?all=1"), http_ok(200)),
    Endpoint(
        "approvals listing", "viewer", "list", webhook("GET", "/approvals?ledger=1"), http_ok(200)
    ),
    Endpoint("status report", "viewer", "list", webhook("GET", "/status?ledger=1"), http_ok(200)),
    Endpoint(
        "mcp trigger_run", "operator", "agent",
        mcp("trigger_run", lambda a: {"agent_id": a, "focus": "look"}), mcp_ok,
    ),
    Endpoint(
        "mcp read_timeline", "viewer", "agent",
        mcp("read_timeline", lambda a: {"agent_id": a, "run_no": 1}), mcp_ok,
    ),
    Endpoint(
        "mcp recall_memories", "viewer", "agent",
        mcp("recall_memories", lambda a: {"agent_id": a, "query": "orders"}), mcp_ok,
    ),
    Endpoint(
        "mcp answer_approval", "approver", "agent",
        mcp(
            "answer_approval",
            lambda a: {
                "approval_id": APPROVALS[a][-1],
                "decision": "deny",
                "digest": DIGESTS[APPROVALS[a][-1]],
            },
        ),
        mcp_ok,
    ),
    Endpoint("mcp list_agents", "viewer", "list", mcp("list_agents", lambda _: {}), mcp_ok),
    Endpoint("mcp list_approvals", "viewer", "list", mcp("list_approvals", lambda _: {}), mcp_ok),
    Endpoint("a2a message/send", "operator", "agent", a2a("message/send", a2a_message), a2a_result),
    Endpoint(
        "a2a tasks/get", "viewer", "agent", a2a("tasks/get", lambda a: {"id": RUNS[a]}), a2a_result
    ),
    Endpoint(
        "a2a tasks/cancel", "operator", "agent",
        a2a("tasks/cancel", lambda a: {"id": RUNS[a]}), http_ok(200),
    ),
]  # fmt: skip


def expected(grant: str, endpoint: Endpoint, agent: str) -> Outcome:
    """What ``grant`` gets from ``endpoint`` on ``agent``."""
    role, _, pattern = grant.partition(":")
    allowed = role == endpoint.role and (
        endpoint.scope == "list" or not pattern or (endpoint.scope == "agent" and agent == IN)
    )
    if allowed:
        return Outcome("allowed")
    return Outcome("refused", endpoint.role, agent if endpoint.scope == "agent" else None)


def trader(tmp_path: Path, agent_id: str) -> Path:
    """An agent whose "buy" runs park at their order's approval; any other run answers."""
    root = make_app(
        tmp_path / agent_id,
        config=f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n'
        '[governance]\nask = ["place_order"]\n',
    )
    (root / "handlers.py").write_text(HANDLERS.format(orders=str(tmp_path / "orders.txt")))
    buy = [{"tool_calls": [call("place_order", symbol="ACME", amount=5)]}, {"content": "ok"}]
    register_script(
        agent_id, {"cases": [{"when": "Focus: buy", "steps": buy}], "steps": [{"content": "ok"}]}
    )
    return root


def cli(config: OwlClawConfig, token: str, *args: str) -> tuple[int, str]:
    """``owlclaw`` as a principal's user runs it: its token in OWLCLAW_TOKEN."""
    env = os.environ | {
        "OWLCLAW_SERVER_PORT": str(config.server.port),
        "OWLCLAW_TOKEN": token,
        "OWLCLAW_DATA_DIR": config.data_dir,
    }
    done = subprocess.run(
        [sys.executable, "-m", "owlclaw", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def client_as(config: OwlClawConfig, token: str) -> ServerClient:
    """The CLI's client with a principal's token."""
    server = msgspec.structs.replace(config.server, token=token)
    return ServerClient(msgspec.structs.replace(config, server=server))


ADMIN = {"Authorization": f"Bearer {SERVER_TOKEN}"}


async def park(service: Service, http: httpx.AsyncClient, agent: str) -> str:
    """A run of ``agent`` parked at its order's approval."""
    started = await http.post(f"/agents/{agent}/trigger", json={"focus": "buy"}, headers=ADMIN)
    assert started.status_code == 202, started.text
    run_id: str = started.json()["run_id"]
    assert (await service.ask(Result(agent_id=agent, run_id=run_id))).status == "parked"
    return run_id


async def matrix(
    service: Service, http: httpx.AsyncClient, tokens: dict[str, str], revoked: str
) -> None:
    ledger = service.ledger
    assert ledger is not None
    runs = {IN: [await park(service, http, IN) for _ in range(3)]}
    runs[OUT] = [await park(service, http, OUT)]
    pending = await asyncio.to_thread(service.pending_approvals)
    of_run = {a.run_id: a.approval_id for a in pending}
    DIGESTS.update({a.approval_id: a.digest for a in pending})
    APPROVALS[IN] = [of_run[r] for r in runs[IN][:2]]  # one for the webhook, one for MCP
    APPROVALS[OUT] = [of_run[runs[OUT][0]]]
    RUNS.update({IN: runs[IN][2], OUT: runs[OUT][0]})  # A2A cancels these

    before = await asyncio.to_thread(ledger.log.last_committed)
    served: list[tuple[str, Endpoint, str]] = []
    for name, grant in GRANTS.items():
        bearer = {"Authorization": f"Bearer {tokens[name]}"}
        for endpoint in ENDPOINTS:
            for agent in (IN, OUT):
                want = expected(grant, endpoint, agent)
                if want.kind == "allowed":
                    served.append((name, endpoint, agent))
                    continue
                got = await endpoint.send(http, bearer, agent)
                assert got == want, (name, endpoint.name, agent, got)
                assert await asyncio.to_thread(ledger.log.last_committed) == before, (
                    name,
                    endpoint.name,
                )
    assert len(served) == 67  # of 5 x 27 x 2: the other 203 were refused above
    for bearer in ({}, {"Authorization": f"Bearer {revoked}"}, {"Authorization": "Bearer x"}):
        for endpoint in ENDPOINTS:
            got = await endpoint.send(http, bearer, IN)
            assert got.kind == "unauthorized", (bearer, endpoint.name, got)
    assert await asyncio.to_thread(ledger.log.last_committed) == before

    for name, endpoint, agent in served:  # the approver answers before the server token
        bearer = {"Authorization": f"Bearer {tokens[name]}"}
        got = await endpoint.send(http, bearer, agent)
        assert got.kind == "allowed" and endpoint.ok(got), (name, endpoint.name, agent, got)
    for endpoint in ENDPOINTS:
        for agent in (IN, OUT):
            got = await endpoint.send(http, ADMIN, agent)
            assert got.kind == "allowed" and endpoint.ok(got), (endpoint.name, agent, got)

    answers = {
        e.approval_id: (e.by, e.principal)
        for e in ledger.stream(ledger.load_agent(IN).id)
        if isinstance(e, ev.ApprovalDenied)
    }
    assert [answers[a] for a in APPROVALS[IN]] == [("approver-acme", "approver-acme")] * 2
    recorded_by(ledger)
    card = await http.get(f"/a2a/{IN}/.well-known/agent-card.json")
    assert card.status_code == 200  # discovery stays open


def recorded_by(ledger: Ledger) -> None:
    """Each operator action served above names its principal: the trigger's RunQueued (webhook,
    MCP, A2A), the inbound event, the A2A cancel's RunTerminated (the operator cancels first);
    the server token's name ``server-token``."""
    doors = ("webhook", "mcp", "a2a")
    for agent, operator in ((IN, ["operator-acme"]), (OUT, [])):
        stream = ledger.stream(ledger.load_agent(agent).id)
        queued = {(e.trigger, e.by) for e in stream if isinstance(e, ev.RunQueued)}
        assert queued == {(d, p) for d in doors for p in [*operator, BOOTSTRAP]}, agent
        inbound = [e.by for e in stream if isinstance(e, ev.InboundReceived)]
        assert inbound == [*operator, BOOTSTRAP], agent
    cancelled = ledger.stream(uuid.UUID(RUNS[IN]))[-1]  # OUT's resumed when its approval was denied
    assert isinstance(cancelled, ev.RunTerminated) and cancelled.by == "operator-acme"


async def lists(config: OwlClawConfig, tokens: dict[str, str]) -> None:
    """Through the CLI's client: a tenant's viewer sees its agents; no viewer, a 403."""
    with client_as(config, tokens["viewer-acme"]) as viewer:
        status = await asyncio.to_thread(lambda: viewer.status(ledger=True))
        assert list(status["agents"]) == [IN] and "workers" not in status
        assert "ledger" not in status  # every agent's counts: the CLI reads them itself
        listing = await asyncio.to_thread(viewer.approvals, None)
        assert {a.agent_id for a in listing.pending} <= {IN}
        assert set(listing.short) == {a.approval_id for a in listing.pending}
    with client_as(config, tokens["operator-acme"]) as operator:
        with pytest.raises(ServerRefused, match="needs role viewer on some agent") as refused:
            await asyncio.to_thread(operator.status)
        assert (refused.value.status, refused.value.code) == (403, "forbidden")
    with client_as(config, SERVER_TOKEN) as everything:
        status = await asyncio.to_thread(lambda: everything.status(ledger=True))
        assert list(status["agents"]) == [IN, OUT]
        assert [a["agent_id"] for a in status["ledger"]["agents"]] == [IN, OUT]
        listing = await asyncio.to_thread(everything.approvals, None)
        assert listing.served == [a.approval_id for a in listing.pending]  # both are served


async def command_line(config: OwlClawConfig, tokens: dict[str, str], revoked: str) -> None:
    """``owlclaw trigger`` with a principal's token: in scope, out of scope, no role, revoked."""
    operator, viewer = tokens["operator-acme"], tokens["viewer-all"]
    code, said = await asyncio.to_thread(cli, config, operator, "trigger", IN, "--no-wait")
    assert code == 0 and "accepted run" in said, said
    code, said = await asyncio.to_thread(cli, config, operator, "trigger", OUT, "--no-wait")
    assert code != 0 and f"needs role operator on agent '{OUT}'" in said, said
    code, said = await asyncio.to_thread(cli, config, viewer, "trigger", IN, "--no-wait")
    assert code != 0 and f"needs role operator on agent '{IN}'" in said, said
    code, said = await asyncio.to_thread(cli, config, revoked, "trigger", IN, "--no-wait")
    assert code != 0 and "missing or wrong bearer token" in said, said


def test_each_principal_on_each_endpoint_in_and_out_of_scope(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as led:
        store = PrincipalStore(led)
        tokens = {n: store.add(n, [parse_grant(g)], by="test")[1] for n, g in GRANTS.items()}
        _, revoked = store.add("gone", [parse_grant("admin")], by="test")
        store.revoke("gone", by="test")
    config = local_service(fresh_db, tmp_path, token=SERVER_TOKEN)
    server = msgspec.structs.replace(config.server, metrics_token_required=True)
    config = msgspec.structs.replace(config, server=server)
    service = Service(config, [load_app(trader(tmp_path, a)) for a in (IN, OUT)])

    async def main() -> None:
        async with serving(service, config):
            base = f"http://127.0.0.1:{config.server.port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=60) as http:
                await matrix(service, http, tokens, revoked)
            await lists(config, tokens)
            await command_line(config, tokens, revoked)

    asyncio.run(main())
