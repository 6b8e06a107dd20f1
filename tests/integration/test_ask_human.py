"""ask_human on the real ledger: the question parks the run as a pending approval of kind
question; a person answers it with `owlclaw answer` (no server: straight into the ledger) or
through the webhook of a served agent, as a principal with ``approver`` on the agent; the run
resumes with the answer as the tool's result and replays as recorded. An answer outside the
options, or from a principal who may not answer, records nothing; a question nobody answers
gives the model a structured "no answer"."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Result, RunResult, Submit
from owlclaw.reports.approvals import pending
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.apps import make_app
from tests.cli import owlclaw_on
from tests.scripted import call
from tests.served import local_service

pytestmark = pytest.mark.integration

OPTIONS = ["hold", "sell half"]
STEPS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            call("ask_human", question="ACME fell 9%: hold or sell half?", options=OPTIONS)
        ]
    },
    {"content": "done"},
]


def asker(tmp_path: Path, agent_id: str, governance: str = "") -> Path:
    """An app whose scripted model (``scripted/<agent_id>``) asks its question, then ends."""
    config = f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n'
    app = make_app(tmp_path / agent_id, config=config + governance)
    (app / "scripts").mkdir()
    script = {"cases": [{"when": "Trigger", "steps": STEPS}]}
    (app / "scripts" / f"{agent_id}.json").write_text(json.dumps(script))
    register_script(agent_id, STEPS)
    return app


async def on_host(ledger: Ledger, agent_id: str, run_id: str | None = None) -> RunResult:
    """A host runs the agent: a new run until it parks or ends, or the parked ``run_id``."""
    host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{agent_id}",))))
    try:
        if run_id is None:
            run_id = await host.ask(Submit(agent_id=agent_id, trigger="webhook", focus="ACME"))
        return await host.ask(Result(agent_id=agent_id, run_id=run_id))
    finally:
        await host.close()


def told(ledger: Ledger, run_id: str) -> Any:
    events = ledger.stream(uuid.UUID(run_id))
    [done] = [e for e in events if isinstance(e, ev.ToolCallSucceeded) and e.tool == "ask_human"]
    return done.result


def answers(ledger: Ledger, agent_id: str) -> list[ev.ApprovalGranted]:
    stream = ledger.stream(ledger.load_agent(agent_id).id)
    return [e for e in stream if isinstance(e, ev.ApprovalGranted)]


def test_answered_with_owlclaw_answer_the_run_resumes_with_it_and_replays(
    ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    ledger.register_agent("desk", str(asker(tmp_path, "desk")))
    parked = asyncio.run(on_host(ledger, "desk"))
    assert parked.status == "parked"
    listed = owlclaw_on(fresh_db, "approvals", "--json", cwd=tmp_path)
    [question] = json.loads(listed.stdout)
    assert (question["kind"], question["tool"], question["run_id"]) == (
        "question",
        "ask_human",
        parked.run_id,
    )
    assert question["arguments"]["options"] == OPTIONS

    prefix = question["approval_id"][:12]
    refused = owlclaw_on(fresh_db, "answer", prefix, "buy more", "--by", "alice", cwd=tmp_path)
    assert refused.returncode == 2
    assert "'buy more' is not one of the options" in " ".join(refused.stderr.split())
    denied = owlclaw_on(fresh_db, "deny", prefix, "--by", "alice", cwd=tmp_path)
    assert denied.returncode != 0 and "is a question: answer it" in denied.stderr
    assert answers(ledger, "desk") == []  # nothing recorded

    answered = owlclaw_on(fresh_db, "answer", prefix, "sell half", "--by", "alice", cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert "answered question" in answered.stdout
    [granted] = answers(ledger, "desk")
    assert (granted.answer, granted.by) == ("sell half", "alice")

    resumed = asyncio.run(on_host(ledger, "desk", parked.run_id))
    assert resumed.status == "completed"
    assert told(ledger, parked.run_id) == {"answered": True, "answer": "sell half", "by": "alice"}
    assert pending(ledger, ["desk"]) == []
    verified = owlclaw_on(fresh_db, "replay", "desk", "1", "--verify", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_question_nobody_answers_resumes_with_a_structured_no_answer(
    ledger: Ledger, tmp_path: Path
) -> None:
    app = asker(tmp_path, "quiet", "[governance]\napproval_timeout_s = 0.2\n")
    ledger.register_agent("quiet", str(app))
    parked = asyncio.run(on_host(ledger, "quiet"))
    assert parked.status == "parked"
    time.sleep(0.3)  # past the expiry: the next activation records it
    resumed = asyncio.run(on_host(ledger, "quiet", parked.run_id))
    assert resumed.status == "completed"
    result = told(ledger, parked.run_id)
    assert result["answered"] is False and result["reason"].startswith("nobody answered before")
    stream = ledger.stream(ledger.load_agent("quiet").id)
    assert [type(e) for e in stream].count(ev.ApprovalExpired) == 1


def test_through_the_webhook_only_an_approver_of_the_agent_answers_and_only_an_option(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as led:
        store = PrincipalStore(led)
        tokens = {
            name: store.add(name, [parse_grant(grant)], by="test")[1]
            for name, grant in (
                ("viewer", "viewer:desk"),
                ("elsewhere", "approver:other"),
                ("ana", "approver:desk"),
            )
        }
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(asker(tmp_path, "desk"))])

    async def main() -> None:
        async with serving(service, config):
            run_id = await service.ask(Submit(agent_id="desk", trigger="webhook", focus="ACME"))
            result = await service.ask(Result(agent_id="desk", run_id=run_id))
            assert result.status == "parked"
            base = f"http://127.0.0.1:{config.server.port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=60) as http:
                await webhook(http, tokens, run_id)
            done = await service.ask(Result(agent_id="desk", run_id=run_id))
            assert done.status == "completed"

    asyncio.run(main())
    with Ledger(fresh_db.url) as led:
        assert told(led, _only_run(led)) == {"answered": True, "answer": "hold", "by": "ana"}
        [granted] = answers(led, "desk")
        assert (granted.answer, granted.by, granted.principal) == ("hold", "ana", "ana")


async def webhook(http: httpx.AsyncClient, tokens: dict[str, str], run_id: str) -> None:
    def bearer(name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[name]}"}

    [question] = (await http.get("/approvals", headers=bearer("viewer"))).json()
    assert (question["kind"], question["run_id"]) == ("question", run_id)
    url, digest = f"/approvals/{question['approval_id']}", question["digest"]
    for name in ("viewer", "elsewhere"):
        refused = await http.post(
            url, json={"answer": "hold", "digest": digest}, headers=bearer(name)
        )
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden"), name
    outside = await http.post(url, json={"answer": "buy", "digest": digest}, headers=bearer("ana"))
    assert (outside.status_code, outside.json()["code"]) == (400, "invalid_answer")
    assert "not one of the options" in outside.json()["error"]
    approve = await http.post(
        url, json={"decision": "approve", "digest": digest}, headers=bearer("ana")
    )
    assert (approve.status_code, approve.json()["code"]) == (400, "invalid_answer")
    both = await http.post(
        url, json={"decision": "approve", "answer": "hold", "digest": digest}, headers=bearer("ana")
    )
    assert (both.status_code, both.json()["code"]) == (400, "bad_request")
    answered = await http.post(
        url, json={"answer": "hold", "digest": digest}, headers=bearer("ana")
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "granted" and answered.json()["run_id"] == run_id


def _only_run(ledger: Ledger) -> str:
    [queued] = [
        e for e in ledger.stream(ledger.load_agent("desk").id) if isinstance(e, ev.RunQueued)
    ]
    return str(queued.run_id)
