"""The webhook of a real `owlclaw run` service under hostile input: every refusal is a documented
JSON error and records nothing, one unreadable agent does not take `GET /status` down for the
others, `owlclaw trigger` waits for a server that is still starting, and a Hypothesis fuzz over
bodies, headers, paths and agent ids leaves the server up and the ledger readable with SQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from events import agent_stream_id
from owlclaw.app import load_app
from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.messages import Result
from owlclaw.server.service import Service
from owlclaw.server.webhook import MAX_BODY_BYTES, serving
from tests.apps import make_app
from tests.cli import owlclaw
from tests.postgres import DOCUMENTED_SQL
from tests.served import local_service

pytestmark = pytest.mark.integration
T = TypeVar("T")

AGENTS = ("alpha", "beta")
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DOCUMENTED = {
    400: {"bad_request", "unknown_tool", "invalid_arguments"},
    401: {"unauthorized"},
    403: {"forbidden", "self_approval"},
    404: {"unknown_agent", "unknown_approval", "not_found"},
    405: {"method_not_allowed"},
    409: {"approval_closed", "digest_mismatch", "same_approver"},
    413: {"too_large"},
}
"""The JSON errors docs/webhook.md documents, by status."""


def agent_app(root: Path, agent_id: str) -> Path:
    app = make_app(
        root / agent_id,
        config=f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n',
    )
    (app / "scripts").mkdir()
    (app / "scripts" / f"{agent_id}.json").write_text(json.dumps([{"content": "ok"}]))
    return app


def serve(
    fresh_db: Database, tmp_path: Path, then: Callable[[Service, OwlClawConfig], Awaitable[T]]
) -> T:
    """``then`` against a service serving alpha and beta (in this process) on a free port."""
    config = local_service(fresh_db, tmp_path, TOKEN)
    service = Service(config, [load_app(agent_app(tmp_path, a)) for a in AGENTS])

    async def main() -> T:
        async with serving(service, config):
            return await then(service, config)

    return asyncio.run(main())


def assert_documented_error(response: httpx.Response) -> None:
    assert response.headers["Content-Type"].startswith("application/json"), response.text
    data = response.json()
    assert set(data) == {"error", "code"} and isinstance(data["error"], str), data
    assert data["code"] in DOCUMENTED.get(response.status_code, set()), (
        response.status_code,
        data,
    )


def deep(levels: int) -> bytes:
    return b'{"payload": {"a": ' + b"[" * levels + b"]" * levels + b"}}"


HOSTILE_BODIES = {
    "1,000 levels deep": (deep(1_000), "nested deeper than 64 levels"),
    "100,000 levels deep": (deep(100_000), "nested deeper than 64 levels"),
    "not UTF-8": (b'{"focus": "\xff\xfe"}', "not UTF-8"),
    "NUL in the focus": (b'{"focus": "buy\\u0000"}', "NUL character"),
    "NUL in a payload key": (b'{"payload": {"\\u0000": 1}}', "NUL character"),
}


def test_hostile_requests_get_documented_json_errors_and_record_nothing(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        assert service.ledger is not None
        before = service.ledger.log.last_committed()
        base = f"http://127.0.0.1:{config.server.port}"
        trigger = f"{base}/agents/alpha/trigger"
        async with httpx.AsyncClient(trust_env=False, headers=AUTH) as http:
            for what, (body, reason) in HOSTILE_BODIES.items():
                for path in ("/agents/alpha/trigger", "/agents/alpha/events"):
                    if b'"focus"' in body and path.endswith("events"):
                        continue  # a field of triggers only
                    answer = await http.post(base + path, content=body)
                    assert answer.status_code == 400, (what, path, answer.text)
                    assert (
                        answer.json()["code"] == "bad_request" and reason in answer.json()["error"]
                    )
            bad_key = await http.post(trigger, json={}, headers={"Idempotency-Key": b"k\xff"})
            too_large = await http.post(trigger, content=b" " * (MAX_BODY_BYTES + 1))
            no_route = await http.get(f"{base}/nowhere")
            wrong_method = await http.get(trigger)
            health = await http.get(f"{base}/health")
        assert bad_key.status_code == 400 and "Idempotency-Key" in bad_key.json()["error"]
        assert (too_large.status_code, too_large.json()["code"]) == (413, "too_large")
        assert (no_route.status_code, no_route.json()["code"]) == (404, "not_found")
        assert (wrong_method.status_code, wrong_method.json()["code"]) == (
            405,
            "method_not_allowed",
        )
        for answer in (bad_key, too_large, no_route, wrong_method):
            assert_documented_error(answer)
        assert health.json() == {"ok": True, "ready": True}
        assert service.ledger.log.last_committed() == before

    serve(fresh_db, tmp_path, scenario)


def test_status_shows_every_agent_when_one_stream_is_corrupt(
    fresh_db: Database, tmp_path: Path
) -> None:
    async def scenario(service: Service, config: OwlClawConfig) -> None:
        with psycopg.connect(fresh_db.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE ledger_events SET state = '\\x7b7b'::bytea"
                " WHERE originator_id = %s AND originator_version = 2",
                (agent_stream_id("alpha"),),
            )
        async with httpx.AsyncClient(trust_env=False, headers=AUTH) as http:
            status = await http.get(f"http://127.0.0.1:{config.server.port}/status")
        assert status.status_code == 200, status.text
        agents = status.json()["agents"]
        assert agents["beta"]["runs"] == 0 and "unreadable" not in agents["beta"]
        assert agents["alpha"]["app_dir"] == str(tmp_path / "alpha")
        unreadable = agents["alpha"]["unreadable"]
        assert f"stream {agent_stream_id('alpha')} version 2" in unreadable
        assert unreadable.endswith("check it with `owlclaw verify alpha`")

    serve(fresh_db, tmp_path, scenario)


def test_trigger_right_after_run_waits_for_the_server_to_be_ready(
    fresh_db: Database, tmp_path: Path
) -> None:
    """`owlclaw run APP &` then `owlclaw trigger` at once: the trigger waits until the server is
    ready (instead of exit 2, "still starting"), then the run completes."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OWLCLAW_")},
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
        "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
        "OWLCLAW_SERVER_PORT": str(free_port()),
        "OWLCLAW_SERVER_TOKEN": TOKEN,
        "OWLCLAW_PLACEMENT": "local",
    }
    agent_app(tmp_path, "alpha")
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", "alpha"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        done = owlclaw(env, "trigger", "alpha", "--focus", "now", "--json", cwd=tmp_path)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    assert "waiting up to 60 s for the server" in done.stderr


# --- the fuzz test ---------------------------------------------------------------------------

ROUTES = [
    ("POST", "/agents/{}/trigger"),
    ("POST", "/agents/{}/events"),
    ("POST", "/agents/{}/tools"),
    ("POST", "/agents/{}/fires"),
    ("POST", "/agents/{}/activate"),
    ("POST", "/approvals/{}"),
    ("GET", "/approvals"),
    ("GET", "/status"),
    ("GET", "/health"),
]
texts = st.text(max_size=30) | st.sampled_from(["", "\x00", "a\x00b", "\\u0000", "é", "🦉"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
payloads = st.dictionaries(texts, json_values, max_size=4)
SHAPED = {
    "/agents/{}/trigger": {"focus": texts, "payload": payloads, "wait": st.booleans()},
    "/agents/{}/events": {"source": texts, "payload": payloads},
    "/agents/{}/tools": {"enable": st.lists(texts, max_size=2), "disable": st.just([])},
    "/agents/{}/fires": {
        "agent_id": st.sampled_from(AGENTS),
        "schedule_id": texts,
        "fire_time": st.just("2026-01-01T00:00:00Z") | texts,
    },
    "/approvals/{}": {"decision": st.sampled_from(["approve", "deny", "maybe"]), "note": texts},
}
"""Bodies of the route's own shape (any of its fields, hostile text inside)."""
hostile_bodies = st.one_of(
    st.dictionaries(texts, json_values, max_size=4).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=300),
    st.integers(60, 5_000).map(deep),
    st.binary(min_size=1, max_size=20).map(lambda b: b'{"focus": "' + b + b'"}'),
    st.just(b'{"payload": {"k": "' + b"x" * MAX_BODY_BYTES + b'"}}'),
)
header_values = st.binary(max_size=40).map(
    lambda b: bytes(c for c in b if c == 0x20 or 0x21 <= c <= 0x7E or c >= 0x80).strip()
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any], bytes]:
    """(method, path, agent id, headers, body): mostly the routes, with bodies of their shape
    or hostile ones; sometimes another method or path."""
    route = draw(st.sampled_from([*ROUTES, *ROUTES, *ROUTES, None]))
    verb, template = route or ("GET", draw(texts))
    agent_id = draw(st.sampled_from([*AGENTS, *AGENTS, *AGENTS, None])) or draw(texts)
    path = template.replace("{}", quote(agent_id, safe=""))
    shaped = SHAPED.get(template)
    if shaped is not None and draw(st.sampled_from([True, True, False])):
        body = json.dumps(draw(st.fixed_dictionaries({}, optional=shaped))).encode()
    else:
        body = draw(hostile_bodies)
    method = draw(st.sampled_from([verb] * 4 + ["GET", "PUT", "DELETE"]))
    headers: dict[str, Any] = dict(AUTH) if draw(st.sampled_from([1, 1, 1, 0])) else {}
    if draw(st.booleans()):
        headers["Idempotency-Key"] = draw(header_values)
    if draw(st.booleans()):
        headers["Content-Type"] = draw(header_values)
    return method, "/" + quote(path.lstrip("/"), safe="/%"), agent_id, headers, body


def test_fuzzed_requests_get_2xx_or_documented_json_errors(
    fresh_db: Database, tmp_path: Path
) -> None:
    """One server for every example. A 2xx that started a run is waited for (its run ended),
    so a refused request must leave the ledger's last committed position where it was."""

    async def scenario(service: Service, config: OwlClawConfig) -> None:
        assert service.ledger is not None
        ledger = service.ledger
        loop = asyncio.get_running_loop()
        base = f"http://127.0.0.1:{config.server.port}"
        seen: dict[int, int] = {}

        @settings(
            max_examples=150,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(request=requests())
        @example(request=("POST", "/agents/alpha/trigger", "alpha", AUTH, deep(1_000)))
        @example(request=("POST", "/agents/beta/events", "beta", AUTH, b'{"source": "\xff"}'))
        @example(request=("POST", "/agents/alpha/trigger", "alpha", AUTH, b'{"focus": "\\u0000"}'))
        @example(
            request=("POST", "/agents/alpha/trigger", "alpha", AUTH, b" " * MAX_BODY_BYTES * 2)
        )
        @example(request=("POST", "/agents/alpha/trigger", "alpha", AUTH, b'{"focus": "fine"}'))
        def one_request(request: tuple[str, str, str, dict[str, Any], bytes]) -> None:
            method, path, agent_id, headers, body = request
            before = ledger.log.last_committed()
            with httpx.Client(trust_env=False, timeout=30) as http:
                response = http.request(method, base + path, content=body, headers=headers)
            seen[response.status_code] = seen.get(response.status_code, 0) + 1
            if response.status_code >= 300:
                assert_documented_error(response)
                assert ledger.log.last_committed() == before, (method, path, response.text)
                return
            data = response.json()
            if isinstance(data, dict) and data.get("run_id"):  # let it end: the ledger is
                ended = service.ask(
                    Result(agent_id=agent_id, run_id=data["run_id"])
                )  # quiet for the next example
                asyncio.run_coroutine_threadsafe(ended, loop).result(timeout=30)

        await asyncio.to_thread(one_request)
        async with httpx.AsyncClient(trust_env=False) as http:
            health = await http.get(f"{base}/health")
        assert health.json() == {"ok": True, "ready": True}
        assert seen.keys() - {200, 202} <= DOCUMENTED.keys(), seen
        assert all(seen.get(s) for s in (202, 400, 401, 404, 405, 413)), seen
        with psycopg.connect(fresh_db.url) as conn:
            assert len(conn.execute(DOCUMENTED_SQL).fetchall()) > len(AGENTS)

    serve(fresh_db, tmp_path, scenario)
