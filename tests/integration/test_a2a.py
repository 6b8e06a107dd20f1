"""A2A both ways against real `owlclaw run` services (agents hosted locally, each on its own
database and loopback port): agent ``a`` calls agent ``b`` of another service as its tool
``a2a__b``, the call linked in both ledgers by the task id; and the ``a2a-sdk`` client against
OwlClaw: the card, message/send, tasks/get, a run parked for approval, tasks/cancel, streaming,
0.3's method names, and no token refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.messages import SubmitAndWait
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from owlclaw.tools.tool import idempotency_key
from tests.apps import make_app, skill
from tests.served import local_service

pytestmark = pytest.mark.integration
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
T = TypeVar("T")

B_SCRIPT = {
    "cases": [
        {"when": "what is 2+2", "steps": [{"content": "four"}]},
        {
            "when": "needs approval",
            "steps": [
                {"tool_calls": [{"name": "remember", "arguments": {"content": "x"}}]},
                {"content": "remembered"},
            ],
        },
    ]
}
A_SCRIPT = {
    "cases": [
        {
            "when": "ask b",
            "steps": [
                {"tool_calls": [{"name": "a2a__b", "arguments": {"message": "what is 2+2"}}]},
                {"content": "b answered"},
            ],
        }
    ]
}


def scripted(root: Path, agent_id: str, script: dict[str, Any], extra: str = "") -> Path:
    config = f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n{extra}'
    identity = "# Identity\n\nI add numbers for other agents.\n"
    app = make_app(root, {"adding": skill("adding")}, identity=identity, config=config)
    (app / "scripts").mkdir()
    (app / "scripts" / f"{agent_id}.json").write_text(json.dumps(script))
    return app


@pytest.fixture
def second_db(pg_server: Database) -> Iterator[Database]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


def serve_b(fresh_db: Database, tmp_path: Path) -> tuple[Service, OwlClawConfig]:
    app = scripted(tmp_path / "b", "b", B_SCRIPT, '[governance]\nask = ["remember"]\n')
    config = local_service(fresh_db, tmp_path / "service-b", token="token-b")
    return Service(config, [load_app(app)]), config


def run_served(
    services: list[tuple[Service, OwlClawConfig]], then: Callable[[], Awaitable[T]]
) -> T:
    """``then`` while every service is serving."""

    async def main() -> T:
        async with contextlib.AsyncExitStack() as stack:
            for service, config in services:
                await stack.enter_async_context(serving(service, config))
            return await then()

    return asyncio.run(main())


def test_an_agent_calls_an_agent_of_another_service_as_a_tool_linked_by_the_task_id(
    fresh_db: Database, second_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("B_TOKEN", "Bearer token-b")
    service_b, config_b = serve_b(fresh_db, tmp_path)
    peer = f'url = "http://127.0.0.1:{config_b.server.port}/a2a/b"'
    a2a = f'[a2a.peers.b]\n{peer}\nheaders_env = {{ Authorization = "B_TOKEN" }}\n'
    app_a = scripted(tmp_path / "a", "a", A_SCRIPT, a2a)
    config_a = local_service(second_db, tmp_path / "service-a", token="token-a")
    service_a = Service(config_a, [load_app(app_a)])

    async def scenario() -> Any:
        return await service_a.ask(SubmitAndWait(agent_id="a", trigger="webhook", focus="ask b"))

    result = run_served([(service_b, config_b), (service_a, config_a)], scenario)
    assert result.status == "completed"

    ledger_a, ledger_b = Ledger(config_a.database_url), Ledger(config_b.database_url)
    try:
        run_a = ledger_a.stream(uuid.UUID(result.run_id))
        [requested] = [e for e in run_a if isinstance(e, ev.ToolCallRequested)]
        [succeeded] = [e for e in run_a if isinstance(e, ev.ToolCallSucceeded)]
        assert requested.tool == succeeded.tool == "a2a__b"
        assert requested.arguments == {"message": "what is 2+2"}
        task_id = succeeded.result["task_id"]
        assert succeeded.result["state"] == "completed"
        assert succeeded.result["answer"] == "four"
        assert isinstance(run_a[-1], ev.RunCompleted) and run_a[-1].answer == "b answered"

        run_b = ledger_b.stream(uuid.UUID(task_id))  # B's run IS the task
        started = run_b[0]
        assert isinstance(started, ev.RunStarted)
        assert (started.agent_id, started.trigger, started.focus) == ("b", "a2a", "what is 2+2")
        call_key = idempotency_key(uuid.UUID(result.run_id), requested.call_id)
        assert started.context["a2a"]["message_id"] == call_key
        assert isinstance(run_b[-1], ev.RunCompleted) and run_b[-1].answer == "four"
    finally:
        ledger_a.close()
        ledger_b.close()


def user_message(text: str, **fields: Any) -> SendMessageRequest:
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], **fields
    )
    return SendMessageRequest(message=message)


async def sent(client: Client, request: SendMessageRequest) -> Task:
    [response] = [r async for r in client.send_message(request)]
    assert response.HasField("task"), response
    return response.task


def test_the_a2a_sdk_client_drives_an_owlclaw_agent(fresh_db: Database, tmp_path: Path) -> None:
    service, config = serve_b(fresh_db, tmp_path)
    base = f"http://127.0.0.1:{config.server.port}/a2a/b"

    async def scenario() -> None:
        async with httpx.AsyncClient(trust_env=False) as anonymous:
            card = await A2ACardResolver(anonymous, base).get_agent_card()  # public
            refused = await anonymous.post(base, json={"jsonrpc": "2.0", "id": 1})
        assert card.name == "b" and card.description == "I add numbers for other agents."
        assert [s.name for s in card.skills] == ["adding"]
        assert card.supported_interfaces[0].url == base
        assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
        assert refused.status_code == 401

        bearer = {"Authorization": "Bearer token-b"}
        async with httpx.AsyncClient(headers=bearer, trust_env=False, timeout=60) as http:
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            ask = user_message("what is 2+2")
            done = await sent(client, ask)
            assert (await sent(client, ask)).id == done.id  # a resend is the same task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            assert done.artifacts[0].parts[0].text == "four"
            again = await client.get_task(GetTaskRequest(id=done.id))
            assert again.status.state == TaskState.TASK_STATE_COMPLETED
            assert again.context_id == done.context_id

            parked = await sent(client, user_message("needs approval"))
            assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            cancelled = await client.cancel_task(CancelTaskRequest(id=parked.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError, match="has ended"):
                await client.cancel_task(CancelTaskRequest(id=parked.id))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))

            queued = user_message("what is 2+2")
            queued.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            early = await sent(client, queued)
            assert early.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
                TaskState.TASK_STATE_COMPLETED,
            )

            streaming = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            states = [
                r.status_update.status.state
                async for r in streaming.send_message(user_message("what is 2+2"))
                if r.HasField("status_update")
            ]
            assert states[-1] == TaskState.TASK_STATE_COMPLETED

            legacy = await http.post(  # a 0.3 client, which names its version so
                base,
                headers={VERSION_HEADER: "0.3", "traceparent": TRACEPARENT},
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "role": "user",
                            "messageId": "legacy-1",
                            "parts": [{"kind": "text", "text": "what is 2+2"}],
                        }
                    },
                },
            )
            assert legacy.json()["result"]["status"]["state"] == "completed", legacy.text
            assert service.ledger is not None  # the caller's trace goes on in the run
            run = service.ledger.stream(uuid.UUID(legacy.json()["result"]["id"]))
            assert isinstance(run[0], ev.RunStarted)
            assert run[0].context["traceparent"] == TRACEPARENT

        unauthorised = ClientFactory(ClientConfig(streaming=False)).create(card)
        with pytest.raises(A2AClientError):
            await unauthorised.get_task(GetTaskRequest(id=done.id))

    run_served([(service, config)], scenario)
