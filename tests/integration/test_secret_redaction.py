"""Issue 38's redaction test, served as an operator runs it: an app names ``CRM_TOKEN`` as a
secret; its tool prints and returns the token, the scripted model repeats it, another tool fails
with it in its error, and a later run fails with it in the model's error. The ledger (read back
from PostgreSQL), the OTLP (message content captured) and Langfuse traces, and the console's run
page and events show ``[redacted:CRM_TOKEN]``, never the value."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from events import catalog as ev
from owlclaw import tracing
from owlclaw.app import load_app
from owlclaw.database import Database
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.apps import make_app
from tests.langfuse_receiver import Receiver
from tests.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.scripted import call
from tests.served import local_service

pytestmark = pytest.mark.integration

SECRET = "crm_token_4f9a2b7c1d0e"
MARKER = "[redacted:CRM_TOKEN]"
HANDLERS = (
    "import os\nfrom owlclaw import Registry\nregistry = Registry()\n\n"
    '@registry.capability("Open a CRM session.")\n'
    "def crm_session() -> dict[str, str]:\n"
    "    token = os.environ['CRM_TOKEN']\n"
    "    print('using', token)\n"
    "    return {'stdout': 'using ' + token}\n\n"
    '@registry.capability("Log in to the CRM.")\n'
    "def crm_login() -> str:\n"
    "    raise PermissionError('token ' + os.environ['CRM_TOKEN'] + ' refused')\n"
)
SCRIPT = {
    "cases": [
        {
            "when": "fail",  # a model that errs quoting the token (as a provider's 401 does)
            "steps": [{"tool_calls": [call("crm_session", x=f"{{{{result.crm.{SECRET}}}}}")]}],
        },
        {
            "when": "Trigger",
            "steps": [
                {"tool_calls": [call("crm_session")]},
                {"tool_calls": [call("crm_login")]},
                {"content": f"The CRM session uses {SECRET}."},
            ],
        },
    ]
}


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """OTLP export with message content to the receiver; afterwards tracing is off again."""
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        for name in ("LANGFUSE_PUBLIC_KEY", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            monkeypatch.delenv(name, raising=False)
        yield receiver
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        tracing.enable()


def test_a_secret_a_tool_prints_shows_as_its_marker_in_ledger_trace_and_console(
    fresh_db: Database,
    tmp_path: Path,
    otlp: OtlpReceiver,
    langfuse: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRM_TOKEN", SECRET)
    config_toml = '[agent]\nid = "crm"\nmodels = ["scripted/crm"]\n[secrets]\nenv = ["CRM_TOKEN"]\n'
    root = make_app(tmp_path / "crm", config=config_toml)
    (root / "handlers.py").write_text(HANDLERS)
    (root / "scripts").mkdir()
    (root / "scripts" / "crm.json").write_text(json.dumps(SCRIPT))
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(root)])
    base = f"http://127.0.0.1:{config.server.port}"

    async def scenario() -> tuple[list[ev.LedgerEvent], list[ev.LedgerEvent], str]:
        async with serving(service, config):
            bearer = {"Authorization": "Bearer test-token"}
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=60) as http:
                runs = []
                for focus in ("the session", "fail"):
                    answer = await http.post(
                        "/agents/crm/trigger", json={"wait": True, "focus": focus}, headers=bearer
                    )
                    assert answer.status_code == 200, answer.text
                    runs.append(uuid.UUID(answer.json()["run_id"]))
                login = await http.post(
                    "/ui/login",
                    data={"token": "test-token"},
                    headers={"Origin": base},
                )
                assert login.status_code in (302, 303), login.text
                page = await http.get(f"/ui/agents/crm/runs/{runs[0]}")
                feed = await http.get(f"/ui/api/agents/crm/runs/{runs[0]}/events")
                assert (page.status_code, feed.status_code) == (200, 200), page.text
            assert service.ledger is not None
            ledger = service.ledger
            return ledger.stream(runs[0]), ledger.stream(runs[1]), page.text + feed.text

    served, failed, console = asyncio.run(scenario())
    tracing.flush()

    stored = msgspec.json.encode([*served, *failed]).decode()
    assert SECRET not in stored
    [succeeded] = [e for e in served if isinstance(e, ev.ToolCallSucceeded)]
    assert succeeded.result == {"stdout": f"using {MARKER}"}
    [refused] = [e for e in served if isinstance(e, ev.ToolCallFailed)]
    assert f"token {MARKER} refused" in refused.error
    assert isinstance(served[-1], ev.RunCompleted)
    assert served[-1].answer == f"The CRM session uses {MARKER}."
    assert isinstance(failed[-1], ev.RunFailed)
    assert MARKER in failed[-1].error

    for received in (otlp.received, langfuse.received):
        traced = json.dumps([s.attributes for s in received], default=str)
        assert SECRET not in traced
        assert MARKER in traced

    assert SECRET not in console
    assert MARKER in console
