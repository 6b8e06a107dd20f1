"""ask_human: a question parks the run as an approval of kind question; a person's answer (one
of the options, or bounded free text) is the tool's result when the run resumes, a question
nobody answers is a structured "no answer", and an answer that does not fit what was asked is
refused with nothing recorded. The resumed run replays as recorded."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.agent_state import InvalidAnswer
from events.approvals import MAX_ANSWER_CHARS
from events.run import Run
from events.streams import now
from owlclaw.audit.verify import replay_run
from owlclaw.cli.approvals import _asked
from owlclaw.messages import AnswerApproval, Decision, RunResult
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.executor import QUESTION
from tests.scripted import agent_events, call, play, run_events

OPTIONS = ["hold", "sell half"]
ASK = {"tool_calls": [call("ask_human", question="Sell ACME?", options=OPTIONS)]}


def asked(runtime: AgentRuntime, *steps: dict[str, Any]) -> tuple[RunResult, str, str]:
    """A run parked at its ask_human; (result, approval id, digest to answer for)."""
    parked = play(runtime, [ASK, *steps, {"content": "done"}])
    assert parked.status == "parked"
    [(approval_id, approval)] = runtime.setup.head().state.approvals.items()
    return parked, approval_id, approval.shown()[1]


def answer(runtime: AgentRuntime, decision: Decision) -> None:
    message = AnswerApproval(agent_id=runtime.agent_id, decision=decision)
    asyncio.run(runtime.inbox.answer_approval(message))


def told(ledger: Ledger, result: RunResult) -> Any:
    [done] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallSucceeded)]
    return done.result


def test_a_question_parks_the_run_and_the_answer_is_the_tool_result(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "asker", models=["x"])
    parked, approval_id, digest = asked(runtime)
    [request] = [e for e in agent_events(ledger, "asker") if isinstance(e, ev.ApprovalRequested)]
    assert (request.kind, request.tool, request.reason) == ("question", "ask_human", QUESTION)
    assert request.arguments == {"question": "Sell ACME?", "options": OPTIONS}
    assert [type(e) for e in run_events(ledger, parked)][-1] is ev.RunParked

    answer(runtime, Decision(approval_id, True, "alice", digest=digest, answer="sell half"))
    resumed = asyncio.run(runtime.resume(UUID(parked.run_id)))
    assert resumed.status == "completed"
    assert told(ledger, resumed) == {"answered": True, "answer": "sell half", "by": "alice"}
    runtime.close()
    assert replay_run(ledger, "asker", 1).matched


def test_free_text_is_taken_without_options_up_to_its_bound(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "asker", models=["x"])
    steps = [{"tool_calls": [call("ask_human", question="Which account?")]}, {"content": "ok"}]
    parked = play(runtime, steps)
    [(approval_id, approval)] = runtime.setup.head().state.approvals.items()
    digest = approval.shown()[1]
    too_long = "x" * (MAX_ANSWER_CHARS + 1)
    for wrong in (too_long, "  "):
        with pytest.raises(InvalidAnswer, match="at most"):
            answer(runtime, Decision(approval_id, True, "alice", digest=digest, answer=wrong))
    answer(runtime, Decision(approval_id, True, "alice", digest=digest, answer="the ISA one"))
    resumed = asyncio.run(runtime.resume(UUID(parked.run_id)))
    assert told(ledger, resumed)["answer"] == "the ISA one"


def test_an_answer_outside_the_options_is_refused_and_records_nothing(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "asker", models=["x"])
    _, approval_id, digest = asked(runtime)
    before = len(agent_events(ledger, "asker"))
    with pytest.raises(InvalidAnswer, match=r"not one of the options.*'hold', 'sell half'"):
        answer(runtime, Decision(approval_id, True, "alice", digest=digest, answer="buy more"))
    with pytest.raises(InvalidAnswer, match="is a question: answer it"):
        answer(runtime, Decision(approval_id, True, "alice", digest=digest))  # a bare approve
    with pytest.raises(InvalidAnswer, match="is a question"):
        answer(runtime, Decision(approval_id, False, "alice", digest=digest))  # a deny
    assert len(agent_events(ledger, "asker")) == before
    assert runtime.setup.head().state.approvals[approval_id].status == "pending"


def test_a_question_nobody_answers_gives_the_model_a_structured_no_answer(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "asker", models=["x"])
    parked, _, _ = asked(runtime)
    agent = ledger.load_agent("asker")
    assert agent.expire_approvals(now() + timedelta(days=2)) == [UUID(parked.run_id)]
    ledger.append(agent)
    resumed = asyncio.run(runtime.resume(UUID(parked.run_id)))
    assert resumed.status == "completed"
    result = told(ledger, resumed)
    assert result["answered"] is False and result["reason"].startswith("nobody answered before")
    assert not [e for e in run_events(ledger, resumed) if isinstance(e, ev.ToolCallDenied)]
    runtime.close()
    assert replay_run(ledger, "asker", 1).matched


def test_a_call_s_approval_takes_no_text_answer(ledger: Ledger) -> None:
    agent = ledger.register_agent("trader")
    run = Run.start("trader", agent.queue_run("webhook", "buy"))
    order = {"symbol": "ACME"}
    approval_id = agent.request_approval(run.id, "c1", "place_order", order, "ask", [], 60)
    digest = agent.state.approvals[approval_id].shown()[1]
    with pytest.raises(InvalidAnswer, match="is of a call: approve or deny it"):
        agent.answer_approval(approval_id, True, "alice", digest=digest, answer="yes")
    assert agent.state.approvals[approval_id].status == "pending"


@settings(max_examples=50)
@given(
    options=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=5, unique=True),
    given_answer=st.text(max_size=30),
)
def test_only_an_option_is_ever_recorded_as_the_answer(
    options: list[str], given_answer: str
) -> None:
    with Ledger.in_memory() as ledger:
        agent = ledger.register_agent("asker")
        run = Run.start("asker", agent.queue_run("webhook", "ask"))
        arguments = {"question": "which?", "options": options}
        approval_id = agent.request_approval(
            run.id, "c1", "ask_human", arguments, QUESTION, [], 60, kind="question"
        )
        digest = agent.state.approvals[approval_id].shown()[1]
        try:
            agent.answer_approval(approval_id, True, "alice", digest=digest, answer=given_answer)
        except InvalidAnswer:
            assert given_answer not in options or not given_answer.strip()
            assert agent.state.approvals[approval_id].status == "pending"
        else:
            assert agent.state.approvals[approval_id].answer == given_answer in options


def test_ask_human_refuses_malformed_questions_as_the_model_s_error() -> None:
    spec = BUILTINS["ask_human"].spec
    assert spec.question
    malformed = (
        {},
        {"question": ""},
        {"question": "q", "options": [""]},
        {"question": "q", "x": 1},
    )
    for bad in malformed:
        parsed = spec.parse(msgspec.json.encode(bad))
        assert getattr(parsed, "error_code", None) == "INVALID_ARGUMENTS", bad


def test_a_listing_shows_a_question_with_its_options_and_a_call_s_arguments_as_json() -> None:
    question = {"question": "Sell ACME?", "options": OPTIONS}
    assert _asked("question", question) == "Sell ACME? [hold | sell half]"
    assert _asked("question", {"question": "Which account?", "options": []}) == "Which account?"
    assert _asked("call", {"symbol": "ACME"}) == '{"symbol": "ACME"}'


def test_owlclaw_trigger_says_a_parked_question_waits_for_an_answer_not_an_approval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from owlclaw.cli.trigger import _parked_status

    header: dict[str, Any] = {
        "originator_id": UUID(int=1),
        "originator_version": 3,
        "timestamp": now(),
    }
    asked = ev.ToolCallRequested(
        call_id="c1", tool="ask_human", arguments={"question": "hold?"}, **header
    )
    placed = ev.ToolCallRequested(call_id="c2", tool="place_order", arguments={}, **header)
    assert _parked_status([asked, ev.RunParked(approval_id="ap-1", call_id="c1", **header)]) == (
        "parked"
    )
    assert "answer to question ap-1 (`owlclaw answer ap-1 TEXT`)" in " ".join(
        capsys.readouterr().err.split()
    )
    assert _parked_status([placed, ev.RunParked(approval_id="ap-2", call_id="c2", **header)]) == (
        "parked"
    )
    assert "approval ap-2 (`owlclaw approve ap-2` or" in " ".join(capsys.readouterr().err.split())
