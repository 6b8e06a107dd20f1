"""A run of an app that names a secret: what its tool returns, what the model repeats, a tool's
error and traceback, and a run's failure reach the ledger with ``[redacted:NAME]``, never the
value (the in-memory ledger, through the same codec as PostgreSQL's); the model is shown the
same, so a run resumed from the record shows it the conversation it saw live."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.messages import AnswerApproval, Decision, Result, Submit
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from tests.apps import make_app
from tests.scripted import agent_events, call, play, run_events, run_script

SECRET = "crm-token-0123456789"
MARKER = "[redacted:CRM_TOKEN]"
HANDLERS = (
    "import os\nfrom owlclaw import Registry\nregistry = Registry()\n\n"
    '@registry.capability("Write a note to the CRM.")\n'
    "def crm_write(note: str) -> str:\n"
    "    return 'written'\n\n"
    '@registry.capability("Look up the CRM session.")\n'
    "def crm_session() -> dict[str, str]:\n"
    "    token = os.environ['CRM_TOKEN']\n"
    "    print('using', token)\n"
    "    return {'stdout': 'using ' + token, 'header': 'Bearer ' + token}\n\n"
    '@registry.capability("Log in to the CRM.")\n'
    "def crm_login() -> str:\n"
    "    raise PermissionError('token ' + os.environ['CRM_TOKEN'] + ' refused')\n"
)


class Recording:
    """The model as the runtime reaches it, keeping a copy of each conversation it is sent."""

    def __init__(self) -> None:
        self.llm = LiteLLM()
        self.sent: list[list[dict[str, Any]]] = []

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        self.sent.append(msgspec.json.decode(msgspec.json.encode(messages)))
        return await self.llm.complete(model, messages, tools, timeout_s)


@pytest.fixture
def model() -> Recording:
    return Recording()


@pytest.fixture
def runtime(
    tmp_path: Path, ledger: Ledger, model: Recording, monkeypatch: pytest.MonkeyPatch
) -> AgentRuntime:
    monkeypatch.setenv("CRM_TOKEN", SECRET)
    config = '[secrets]\nenv = ["CRM_TOKEN"]\n[governance]\nask = ["crm_write"]\n'
    root = make_app(tmp_path / "desk", config=config)
    (root / "handlers.py").write_text(HANDLERS)
    return AgentRuntime(ledger, "desk", models=["x"], app_dir=root, llm=model)


def stored_text(events: list[ev.LedgerEvent]) -> str:
    return msgspec.json.encode(events).decode()


def test_a_tools_secret_and_the_models_repeat_of_it_are_stored_redacted(
    runtime: AgentRuntime, ledger: Ledger
) -> None:
    result = play(
        runtime,
        [{"tool_calls": [call("crm_session")]}, {"content": f"The session uses {SECRET}."}],
    )
    events = run_events(ledger, result)
    assert SECRET not in stored_text(events)
    [succeeded] = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert succeeded.result == {"stdout": f"using {MARKER}", "header": f"Bearer {MARKER}"}
    assert isinstance(events[-1], ev.RunCompleted)
    assert events[-1].answer == f"The session uses {MARKER}."


def test_a_tools_error_and_traceback_are_stored_redacted(
    runtime: AgentRuntime, ledger: Ledger
) -> None:
    result = play(runtime, [{"tool_calls": [call("crm_login")]}, {"content": "done"}])
    events = run_events(ledger, result)
    assert SECRET not in stored_text(events)
    [failed] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert f"token {MARKER} refused" in failed.error


def test_a_run_failing_with_the_secret_in_its_error_is_stored_redacted(
    runtime: AgentRuntime, ledger: Ledger
) -> None:
    """A model's error that echoes the key (as providers' authentication errors do)."""
    runtime.models = [f"scripted/{SECRET}"]
    result = asyncio.run(runtime.run(trigger="webhook"))
    events = run_events(ledger, result)
    assert result.status == "failed"
    assert SECRET not in stored_text(events)
    assert isinstance(events[-1], ev.RunFailed)
    assert MARKER in events[-1].error


def test_the_model_is_shown_the_marker_where_the_record_has_it(
    runtime: AgentRuntime, ledger: Ledger, model: Recording
) -> None:
    """A tool's result, a tool's error, the model's own repeat of the secret and the run's
    focus: each request the model gets holds the marker, never the value."""
    steps = [
        {"tool_calls": [call("crm_session")]},
        {"content": f"The session uses {SECRET}.", "tool_calls": [call("crm_login")]},
        {"content": "done"},
    ]
    result = play(runtime, steps, focus=f"log in with {SECRET}")
    assert result.status == "completed"
    assert SECRET not in msgspec.json.encode(model.sent).decode()
    last = model.sent[-1]
    assert MARKER in last[1]["content"]
    session, repeat, login = last[3], last[4], last[5]
    assert msgspec.json.decode(session["content"]) == {
        "stdout": f"using {MARKER}",
        "header": f"Bearer {MARKER}",
    }
    assert repeat["content"] == f"The session uses {MARKER}."
    assert f"token {MARKER} refused" in msgspec.json.decode(login["content"])["error"]


def test_a_run_resumed_after_an_approval_shows_the_model_the_conversation_it_saw_live(
    runtime: AgentRuntime, ledger: Ledger, model: Recording
) -> None:
    steps = [
        {"tool_calls": [call("crm_session")]},
        {"content": f"Noting {SECRET}.", "tool_calls": [call("crm_write", note="session")]},
        {"content": "done"},
    ]
    parked = play(runtime, steps)
    assert parked.status == "parked"
    [approval_id] = runtime.setup.head().state.approvals
    decision = Decision(approval_id, True, "ops")
    asyncio.run(runtime.inbox.answer_approval(AnswerApproval(agent_id="desk", decision=decision)))
    resumed = asyncio.run(runtime.resume(UUID(parked.run_id)))
    assert resumed.status == "completed"
    live, after = model.sent[1], model.sent[2]  # before parking; after the resumed call
    # past the system prompt, rebuilt as the run resumes (its recent activity moved on)
    assert after[1 : len(live)] == live[1:]
    assert MARKER in live[3]["content"]
    assert after[len(live)]["content"] == f"Noting {MARKER}."
    assert SECRET not in msgspec.json.encode(model.sent).decode()


def test_without_the_secret_named_the_value_is_stored_as_it_is(
    tmp_path: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRM_TOKEN", SECRET)
    root = make_app(tmp_path / "plain")
    (root / "handlers.py").write_text(HANDLERS)
    runtime = AgentRuntime(ledger, "plain", models=["x"], app_dir=root)
    result = run_script(
        runtime, "plain", [{"tool_calls": [call("crm_session")]}, {"content": "ok"}]
    )
    assert SECRET in stored_text(run_events(ledger, result))


def test_a_secret_too_short_to_redact_is_an_agent_warning_once(
    tmp_path: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_HOOK_AUTH", "abc123")
    config = (
        '[tools.channels.ops]\nurl = "https://hooks.example.com/ops"\n'
        'headers_env = { Authorization = "OPS_HOOK_AUTH" }\n'
    )
    root = make_app(tmp_path / "hooks", config=config)
    runtime = AgentRuntime(ledger, "hooks", models=["x"], app_dir=root)
    for _ in range(2):
        play(runtime, [{"content": "ok"}])
    warnings = [e for e in agent_events(ledger, "hooks") if isinstance(e, ev.AgentWarning)]
    assert [(w.source, w.message) for w in warnings] == [
        ("secrets", "not redacted, shorter than 8 characters: OPS_HOOK_AUTH")
    ]
    assert "abc123" not in warnings[0].message


def test_a_first_triggers_focus_is_stored_redacted_as_the_host_accepts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host commits the trigger (RunQueued) as it accepts it, before its run starts."""
    monkeypatch.setenv("CRM_TOKEN", SECRET)
    root = make_app(tmp_path / "desk", config='[secrets]\nenv = ["CRM_TOKEN"]\n')
    register_script("answers", [{"content": "done"}])
    ledger = Ledger.in_memory()
    ledger.register_agent("desk", str(root))

    async def scenario() -> None:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("scripted/answers",))))
        try:
            run_id = await host.ask(Submit(agent_id="desk", trigger="webhook", focus=SECRET))
            await host.ask(Result(agent_id="desk", run_id=run_id))
        finally:
            await host.close()

    asyncio.run(scenario())
    [queued] = [e for e in agent_events(ledger, "desk") if isinstance(e, ev.RunQueued)]
    assert queued.focus == MARKER
