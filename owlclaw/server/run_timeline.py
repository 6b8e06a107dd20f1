"""One run's timeline as data: how it stands (``RunResult``), its answer once completed, and one
line per notable step, the narration ``owlclaw trigger`` prints (``owlclaw.reports.narrate``).
What the MCP server's timeline tool and resource return."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from events import Ledger, UnknownRun
from events import catalog as ev
from events.run import Run, RunState
from events.streams import run_stream_id
from owlclaw.messages import RunResult
from owlclaw.reports.narrate import step_text


def run_no_of(led: Ledger, agent_id: str, run_no: int | None, run_id: str | None) -> int:
    """The number of one of the agent's runs, named by its number or its id (exactly one);
    UnknownAgent / UnknownRun otherwise, ValueError for neither or both."""
    if (run_no is None) == (run_id is None):
        raise ValueError("name the run by run_no or by run_id (one of them)")
    run_ids = led.load_agent(agent_id).run_ids()
    if run_no is not None:
        if not 1 <= run_no <= len(run_ids):
            raise UnknownRun(f"agent {agent_id!r} has no run {run_no} (it has {len(run_ids)})")
        return run_no
    assert run_id is not None
    try:
        return run_ids.index(uuid.UUID(run_id)) + 1
    except ValueError:
        raise UnknownRun(f"agent {agent_id!r} has no run {run_id!r}") from None


def answer_of(events: list[ev.LedgerEvent]) -> str | None:
    """The run's answer, once it has completed."""
    return next((e.answer for e in reversed(events) if isinstance(e, ev.RunCompleted)), None)


def run_timeline(led: Ledger, agent_id: str, run_no: int) -> dict[str, Any]:
    """The run's summary and its narrated steps (bookkeeping events left out); a run accepted
    but not started yet has none, and its status is ``pending``."""
    run_id = run_stream_id(agent_id, run_no)
    events = led.stream(run_id)
    run = led.load_run(run_id) if events else Run(run_id, RunState(agent_id, run_no))
    steps = [
        {"version": e.originator_version, "event": type(e).__name__, "text": text}
        for e in events
        if (text := step_text(e)) is not None
    ]
    return {
        "agent_id": agent_id,
        "run_no": run_no,
        **msgspec.to_builtins(RunResult.of(run)),
        "answer": answer_of(events),
        "steps": steps,
    }


def timeline_text(timeline: dict[str, Any]) -> str:
    """The timeline as plain text, one step a line (the resource's form)."""
    head = (
        f"{timeline['agent_id']} run {timeline['run_no']} ({timeline['run_id']}):"
        f" {timeline['status']}"
    )
    return "\n".join([head, *(f"{s['version']:>4} {s['text']}" for s in timeline["steps"])]) + "\n"
