"""A run's timeline as the MCP server gives it (in-memory ledger): the run named by its number or
its id, refused otherwise; its narrated steps, status and answer; its plain-text form."""

from __future__ import annotations

import uuid

import pytest

from events import Ledger, UnknownAgent, UnknownRun
from events import catalog as ev
from events.run import Run
from owlclaw.server.run_timeline import run_no_of, run_timeline, timeline_text

AGENT = "desk"


@pytest.fixture
def ledger() -> Ledger:
    """Run 1 called a tool and answered; run 2 is still queued."""
    led = Ledger.in_memory()
    agent = led.register_agent(AGENT)
    first = Run.start(AGENT, agent.queue_run("mcp", focus="check"))
    first.record(ev.LLMResponded, model="m", message={"role": "assistant", "content": ""})
    first.record(ev.ToolCallRequested, call_id="c1", tool="query_state", arguments={"s": "m"})
    first.record(ev.ToolCallSucceeded, call_id="c1", tool="query_state", result={"open": True})
    first.record(ev.RunCompleted, answer="market open")
    led.append(agent, first)
    agent.queue_run("webhook")
    led.append(agent)
    return led


def test_a_run_is_named_by_its_number_or_its_id(ledger: Ledger) -> None:
    [first, second] = ledger.load_agent(AGENT).run_ids()
    assert run_no_of(ledger, AGENT, 2, None) == 2
    assert run_no_of(ledger, AGENT, None, str(first)) == 1
    assert run_no_of(ledger, AGENT, None, str(second)) == 2


@pytest.mark.parametrize(
    ("run_no", "run_id", "error", "message"),
    [
        (3, None, UnknownRun, "agent 'desk' has no run 3 (it has 2)"),
        (0, None, UnknownRun, "agent 'desk' has no run 0 (it has 2)"),
        (None, "not-a-uuid", UnknownRun, "agent 'desk' has no run 'not-a-uuid'"),
        (None, str(uuid.UUID(int=7)), UnknownRun, f"agent 'desk' has no run '{uuid.UUID(int=7)}'"),
        (None, None, ValueError, "name the run by run_no or by run_id (one of them)"),
        (1, "x", ValueError, "name the run by run_no or by run_id (one of them)"),
    ],
)
def test_anything_else_is_refused_with_what_was_wrong(
    ledger: Ledger, run_no: int | None, run_id: str | None, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as refused:
        run_no_of(ledger, AGENT, run_no, run_id)
    assert str(refused.value) == message


def test_an_unknown_agent_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UnknownAgent):
        run_no_of(ledger, "nobody", 1, None)


def test_the_timeline_has_the_narrated_steps_the_status_and_the_answer(ledger: Ledger) -> None:
    timeline = run_timeline(ledger, AGENT, 1)
    assert (timeline["agent_id"], timeline["run_no"], timeline["status"]) == (
        AGENT,
        1,
        "completed",
    )
    assert timeline["run_id"] == str(ledger.load_agent(AGENT).run_ids()[0])
    assert (timeline["tools_called"], timeline["answer"]) == (["query_state"], "market open")
    assert [(s["event"], s["text"]) for s in timeline["steps"]] == [
        ("RunStarted", "run 1 started by mcp: 'check'"),
        ("ToolCallRequested", "→ query_state(s=m)"),
        ("ToolCallSucceeded", '  ← query_state: {"open": true}'),
        ("RunCompleted", "completed: market open"),
    ]
    assert timeline_text(timeline).splitlines() == [
        f"desk run 1 ({timeline['run_id']}): completed",
        *(f"{s['version']:>4} {s['text']}" for s in timeline["steps"]),
    ]


def test_a_run_accepted_but_not_started_is_pending_with_no_steps(ledger: Ledger) -> None:
    timeline = run_timeline(ledger, AGENT, 2)
    assert (timeline["status"], timeline["steps"], timeline["answer"]) == ("pending", [], None)
