"""A2A without a network: a run's events as a task (state, status text, context id, answer
artifact), the agent card, and the ``[a2a]`` table refused when it is wrong."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Artifact, Part, StreamResponse, Task, TaskState, TaskStatus

from events import catalog as ev
from events.run import Run
from owlclaw.a2a.card import agent_card
from owlclaw.a2a.peers import PeerParams, PeerTool, a2a_peers, outcome, peer_tools
from owlclaw.a2a.states import state_name, status_text, task_state
from owlclaw.a2a.tasks import run_task
from owlclaw.app import load_app
from owlclaw.server.validation import InvalidApps, validate_apps
from owlclaw.tools.errors import ToolError
from tests.apps import make_app, skill

RUN = uuid.uuid4()
S = TaskState


def events(*steps: tuple[type[ev.LedgerEvent], dict[str, Any]]) -> list[ev.LedgerEvent]:
    run = Run.blank(RUN)
    context = {"a2a": {"context_id": "ctx-1", "message_id": "m-1"}}
    run.record(ev.RunStarted, agent_id="b", run_no=1, trigger="a2a", focus="hi", context=context)
    for kind, fields in steps:
        run.record(kind, **fields)
    return run.pending_events


PARKED_FOR_APPROVAL = (ev.RunParked, {"approval_id": "ap-1", "call_id": "c1"})
PARKED_FOR_SUBAGENT = (ev.RunParked, {"spawn_id": "sp-1", "call_id": "c1"})


@pytest.mark.parametrize(
    ("steps", "state", "text"),
    [
        ((), S.TASK_STATE_WORKING, ""),
        ((PARKED_FOR_APPROVAL,), S.TASK_STATE_INPUT_REQUIRED, "approval ap-1"),
        ((PARKED_FOR_SUBAGENT,), S.TASK_STATE_WORKING, ""),
        ((PARKED_FOR_APPROVAL, (ev.RunResumed, {"from_version": 2})), S.TASK_STATE_WORKING, ""),
        (((ev.RunInterrupted, {"reason": "crash"}),), S.TASK_STATE_WORKING, ""),
        (((ev.RunCompleted, {"answer": "four"}),), S.TASK_STATE_COMPLETED, "four"),
        (((ev.RunTerminated, {"reason": "cancelled"}),), S.TASK_STATE_CANCELED, "cancelled"),
        (((ev.RunTerminated, {"reason": "budget"}),), S.TASK_STATE_FAILED, "budget"),
        (((ev.RunFailed, {"error": "model down"}),), S.TASK_STATE_FAILED, "model down"),
        (((ev.RunTimedOut, {"timeout_s": 30.0}),), S.TASK_STATE_FAILED, "30 s limit"),
        (((ev.RunSkipped, {"reason": "idle"}),), S.TASK_STATE_REJECTED, "idle"),
    ],
)
def test_a_runs_events_give_its_task_state_and_status_text(
    steps: tuple[tuple[type[ev.LedgerEvent], dict[str, Any]], ...], state: int, text: str
) -> None:
    recorded = events(*steps)
    assert task_state(recorded) == state
    assert text in status_text(recorded)
    assert bool(status_text(recorded)) == bool(text)


def test_a_queued_run_is_a_submitted_task_with_the_callers_context() -> None:
    task = run_task(str(RUN), [], "ctx-given")
    assert (task.id, task.context_id) == (str(RUN), "ctx-given")
    assert task.status.state == S.TASK_STATE_SUBMITTED
    assert state_name(task.status.state) == "submitted"


def test_a_completed_run_is_a_task_with_its_answer_as_artifact_and_the_callers_message() -> None:
    task = run_task(str(RUN), events((ev.RunCompleted, {"answer": "four"})))
    assert (task.id, task.context_id) == (str(RUN), "ctx-1")
    assert [a.parts[0].text for a in task.artifacts] == ["four"]
    assert task.status.message.parts[0].text == "four"
    [asked] = task.history
    assert (asked.message_id, asked.parts[0].text) == ("m-1", "hi")


def test_a_parked_run_has_no_artifact() -> None:
    task = run_task(str(RUN), events(PARKED_FOR_APPROVAL))
    assert task.status.state == S.TASK_STATE_INPUT_REQUIRED
    assert not task.artifacts
    assert state_name(task.status.state) == "input-required"


def test_the_card_names_the_agent_its_skills_its_endpoint_and_bearer_auth(tmp_path: Path) -> None:
    identity = "# Identity\n\nI add numbers.\n\n## My Capabilities\n- adding\n"
    root = make_app(tmp_path / "adder", {"adding": skill("adding")}, identity=identity)
    card = agent_card(load_app(root), "http://127.0.0.1:8765/a2a/adder")
    assert (card.name, card.description) == ("adder", "I add numbers.")
    assert [(s.id, s.description) for s in card.skills] == [("adding", "adding skill")]
    assert card.supported_interfaces[0].url == "http://127.0.0.1:8765/a2a/adder"
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["bearer"]


def test_a_peer_is_a_governed_tool_named_after_it_and_not_idempotent() -> None:
    table = {"a2a": {"peers": {"b": {"url": "http://h:1/a2a/b", "timeout_s": 5}}}}
    [(name, tool)] = peer_tools(table).items()
    assert name == tool.spec.name == "a2a__b"
    assert (tool.spec.idempotent, tool.spec.timeout_s) == (False, 5)
    assert tool.spec.parse({"message": "hi"}) == PeerParams(message="hi")
    assert isinstance(tool.spec.parse({"message": ""}), ToolError)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"peer": {}}, "[a2a]: unknown key 'peer' (did you mean 'peers'?)"),
        ({"peers": {"b": {"url": "http://h/b", "header_env": {}}}}, "did you mean 'headers_env'?"),
        ({"peers": {"b": {}}}, "missing required field `url`"),
        ({"peers": {"b": {"url": "ftp://h/b"}}}, "[a2a.peers.b] url: 'ftp://h/b' is not"),
        ({"peers": {"b c": {"url": "http://h/b"}}}, "a peer name is 1-59 letters"),
        ({"peers": {"b": {"url": "http://h/b", "timeout_s": 0}}}, "timeout_s"),
    ],
)
def test_a_wrong_a2a_table_is_refused_naming_what(table: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        a2a_peers({"a2a": table}, "app/owlclaw.toml")
    assert str(caught.value).startswith("app/owlclaw.toml: ")
    assert expected in str(caught.value)


def test_start_up_validation_refuses_a_bad_peer_and_lets_governance_name_a_good_one(
    tmp_path: Path,
) -> None:
    bad = make_app(tmp_path / "bad", config='[a2a.peers.b]\nurl = "http://h/b"\nretries = 2\n')
    good = make_app(
        tmp_path / "good",
        config='[a2a.peers.b]\nurl = "http://h/b"\n[governance]\nask = ["a2a__b"]\n',
    )
    with pytest.raises(InvalidApps) as caught:
        validate_apps([bad], load_timeout_s=10)
    [problem] = caught.value.problems
    assert "unknown key 'retries'" in problem and "owlclaw.toml" in problem
    assert validate_apps([good], load_timeout_s=10)[0].agent_id == "good"


def test_a_missing_header_variable_is_a_tool_error_naming_the_variable_not_a_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PEER_TOKEN", raising=False)
    tool = PeerTool("b", a2a_peers(_peer({"Authorization": "PEER_TOKEN"}))["b"])
    told = asyncio.run(tool.execute(PeerParams(message="hi"), None))  # type: ignore[arg-type]
    assert isinstance(told, ToolError) and told.error_code == "A2A_HEADER_MISSING"
    assert "PEER_TOKEN" in told.error
    monkeypatch.setenv("PEER_TOKEN", "Bearer s3cret")
    assert tool.headers() == {"Authorization": "Bearer s3cret"}


def _peer(headers_env: dict[str, str]) -> dict[str, Any]:
    return {"a2a": {"peers": {"b": {"url": "http://h/b", "headers_env": headers_env}}}}


def test_a_peers_task_is_the_recorded_result_with_its_id_state_and_answer() -> None:
    done = Task(
        id="t-1",
        context_id="c-1",
        status=TaskStatus(state=S.TASK_STATE_COMPLETED),
        artifacts=[Artifact(artifact_id="answer", parts=[Part(text="four")])],
    )
    assert outcome(StreamResponse(task=done)) == {
        "task_id": "t-1",
        "context_id": "c-1",
        "state": "completed",
        "answer": "four",
    }


def test_the_card_path_the_guard_knows_without_the_sdk_is_the_sdks() -> None:
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

    from owlclaw.a2a.paths import CARD_PATH, is_card_path

    assert CARD_PATH == AGENT_CARD_WELL_KNOWN_PATH
    assert is_card_path(f"/a2a/my-agent{AGENT_CARD_WELL_KNOWN_PATH}")
    assert not is_card_path("/a2a/my-agent")
