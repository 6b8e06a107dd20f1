"""Replaying a recorded run for audit: recorded steps, verification, `owlclaw replay`."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.audit.verify import replay_run
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.models import Answer, LiteLLM
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from tests.audited_run import record
from tests.cli import owlclaw_on as owlclaw
from tests.scripted import call, decide

pytestmark = pytest.mark.integration


def test_replay_reproduces_the_recorded_steps_without_writing(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        head = ledger.log.head()
        report = replay_run(ledger, "audited", 1)
        assert report.matched, report.differences
        assert report.compared >= 10  # responses, requests, outcomes, rejection, the end
        assert ledger.log.head() == head  # audit reads, never writes


def test_replay_reports_where_todays_governance_diverges(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        report = replay_run(ledger, "audited", 1, governance=Governance(deny=("log_decision",)))
    assert not report.matched
    assert any(
        d.replay is not None and d.replay.kind == "ToolCallDenied" and "log_decision" in str(d)
        for d in report.differences
    )


def test_replay_model_refuses_to_invent_responses(fresh_db: Database) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        run_id = ledger.list_runs("audited")[0]
        events = [e for e in ledger.stream(run_id) if not isinstance(e, ev.LLMResponded)][:3]
        events += [e for e in ledger.stream(run_id) if isinstance(e, ev.LLMResponded)][:1]
        truncated = RecordedRun(run_id, events)
        runtime = AgentRuntime(ledger, "audited", models=[f"replay/{run_id}"], replay=truncated)
        result = asyncio.run(runtime.run("webhook", focus="look for entries"))
    assert result.status == "failed"
    [failed] = [e for e in runtime.produced if isinstance(e, ev.RunFailed)]
    assert "recorded 1 model responses" in failed.error


def test_cli_replay_verify(fresh_db: Database, tmp_path: Path) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
    shown = owlclaw(fresh_db, "replay", "audited", "1", "--verify", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["verify"]["matched"] is True
    assert [s["type"] for s in data["steps"]][:2] == ["RunStarted", "VisibleToolsResolved"]
    text = owlclaw(fresh_db, "replay", "audited", "1", "--verify", cwd=tmp_path)
    assert text.returncode == 0 and "replay matches" in text.stdout
    missing = owlclaw(fresh_db, "replay", "audited", "9", cwd=tmp_path)
    assert missing.returncode == 3 and "has no run 9" in missing.stderr


class Crash(BaseException):
    """The process dies (SIGKILL, the machine going away): nothing of the runtime handles it."""


class Quotes:
    """A capability ``quote`` that kills the process on the calls numbered in ``crash_on``."""

    def __init__(self, *, idempotent: bool = False, crash_on: tuple[int, ...] = (1,)):
        self.registry = Registry()
        self.calls: list[str] = []

        @self.registry.capability("Quote a symbol.", idempotent=idempotent)
        async def quote(symbol: str) -> dict[str, Any]:
            self.calls.append(symbol)
            if len(self.calls) in crash_on:
                raise Crash
            return {"symbol": symbol, "price": 101.5}


class StopAtModelCall:
    """The in-process litellm; the process dies as it makes model call number ``n``."""

    def __init__(self, n: int) -> None:
        self.inner = LiteLLM()
        self.n, self.calls = n, 0

    async def complete(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], t: float
    ) -> Answer:
        self.calls += 1
        if self.calls == self.n:
            raise Crash
        return await self.inner.complete(model, messages, tools, t)


def run_until_it_ends(
    ledger: Ledger, agent_id: str, steps: list[dict[str, Any]], quotes: Quotes, **kwargs: Any
) -> list[str]:
    """Run ``steps``; each time the process dies, resume the run in a new runtime (as a host
    does on activation) until it ends. The run's event types."""
    register_script(agent_id, steps)

    def runtime(**more: Any) -> AgentRuntime:
        return AgentRuntime(
            ledger, agent_id, models=[f"scripted/{agent_id}"], registry=quotes.registry, **more
        )

    first = runtime(**kwargs)
    try:
        asyncio.run(first.run("webhook", focus="quote"))
    except Crash:
        pass
    finally:
        first.close()
    run_id = ledger.load_agent(agent_id).state.last_run_id
    assert run_id is not None
    for _ in range(3):
        if ledger.load_run(run_id).state.ended:
            break
        resumed = runtime()
        try:
            asyncio.run(resumed.resume(run_id))
        except Crash:
            pass
        finally:
            resumed.close()
    assert ledger.load_run(run_id).state.status == "completed"
    return [type(e).__name__ for e in ledger.stream(run_id)]


QUOTE = {"tool_calls": [call("quote", symbol="AAPL")]}


@pytest.mark.parametrize(
    ("idempotent", "crash_on", "steps", "quoted", "unknown"),
    [
        # stopped in the capability: its outcome unknown, it is not repeated
        (False, (1,), [QUOTE, {"content": "no quote"}], ["AAPL"], 1),
        # an idempotent capability runs again after its unknown outcome
        (True, (1,), [QUOTE, {"content": "quoted"}], ["AAPL", "AAPL"], 1),
        # stopped in two calls: resumed, and resumed again
        (
            False,
            (1, 2),
            [QUOTE, {"tool_calls": [call("quote", symbol="MSFT")]}, {"content": "none"}],
            ["AAPL", "MSFT"],
            2,
        ),
    ],
    ids=["not-repeated", "idempotent", "stopped-twice"],
)
def test_replay_verify_reproduces_a_run_resumed_after_it_stopped_in_a_tool(
    fresh_db: Database,
    idempotent: bool,
    crash_on: tuple[int, ...],
    steps: list[dict[str, Any]],
    quoted: list[str],
    unknown: int,
) -> None:
    quotes = Quotes(idempotent=idempotent, crash_on=crash_on)
    agent_id = f"stopped-{uuid.uuid4().hex[:6]}"
    with Ledger(fresh_db.url) as ledger:
        kinds = run_until_it_ends(ledger, agent_id, steps, quotes)
        assert quotes.calls == quoted
        assert kinds.count("RunInterrupted") == len(crash_on) == kinds.count("RunResumed")
        assert kinds.count("ToolOutcomeUnknown") == unknown
        assert kinds.count("ToolCallSucceeded") == (1 if idempotent else 0)
        head = ledger.log.head()
        report = replay_run(ledger, agent_id, 1, registry=quotes.registry)
        assert ledger.log.head() == head
    assert report.matched, "\n".join(map(str, report.differences))
    assert report.compared == report.produced


@pytest.mark.parametrize("tool", ["log_decision", "quote"])
def test_replay_verify_reproduces_a_run_resumed_after_it_stopped_between_steps(
    fresh_db: Database, tool: str
) -> None:
    """The process dies while the model is asked for step 3: the quote of step 1 was
    committed with step 2's request; step 2's call ran, its outcome still in flight (a built-in
    runs again on resume, a capability's outcome is unknown)."""
    second = decide(2) if tool == "log_decision" else {"tool_calls": [call("quote", symbol="X")]}
    steps = [QUOTE, second, {"content": "done"}]
    quotes = Quotes(crash_on=())
    agent_id = f"between-{uuid.uuid4().hex[:6]}"
    with Ledger(fresh_db.url) as ledger:
        kinds = run_until_it_ends(ledger, agent_id, steps, quotes, llm=StopAtModelCall(3))
        assert kinds.count("RunInterrupted") == 1 and kinds.count("ToolOutcomeUnknown") == 1
        assert kinds.index("ToolCallSucceeded") < kinds.index("RunInterrupted")  # step 1's
        report = replay_run(ledger, agent_id, 1, registry=quotes.registry)
    assert report.matched, "\n".join(map(str, report.differences))


def test_cli_replay_verify_shows_a_difference_readably_as_the_listing_numbers_it(
    fresh_db: Database, tmp_path: Path
) -> None:
    """A resumed run replayed after the operator switched log_decision off: a real difference,
    after the stop (so the listing's numbers and the compared steps' positions part)."""
    quotes = Quotes()
    steps = [QUOTE, decide(1), {"content": "done"}]
    with Ledger(fresh_db.url) as ledger:
        kinds = run_until_it_ends(ledger, "differs", steps, quotes)
        agent = ledger.load_agent("differs")
        agent.change_tools([], ["log_decision"], ["log_decision"], by="test")
        ledger.append(agent)
    requested = 1 + max(i for i, k in enumerate(kinds) if k == "ToolCallRequested")
    assert kinds.index("RunResumed") < requested - 1

    shown = owlclaw(fresh_db, "replay", "differs", "1", "--verify", cwd=tmp_path)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    listing = [line for line in shown.stdout.splitlines() if re.match(r"\s*\d+ [A-Z]", line)]
    assert [line.split()[:2] for line in listing] == [
        [str(version), kind] for version, kind in enumerate(kinds, 1)
    ]
    assert "('" not in shown.stdout  # no Python tuples
    assert (
        f"DIFFERS step {requested} (ToolCallRequested)\n"
        "  recorded: tool log_decision: requested with {"
    ) in shown.stdout
    assert "  replay:   tool log_decision: denied, disabled by the operator" in shown.stdout
    assert "DIFFERS step 2 (VisibleToolsResolved)\n" in shown.stdout

    data = json.loads(
        owlclaw(fresh_db, "replay", "differs", "1", "--verify", "--json", cwd=tmp_path).stdout
    )
    [difference] = [d for d in data["verify"]["differences"] if d["step"] == requested]
    assert difference["recorded"]["kind"] == "ToolCallRequested"
    assert difference["replay"]["kind"] == "ToolCallDenied"
    assert difference["replay"]["fingerprint"][:2] == ["ToolCallDenied", "log_decision"]
    [step] = [s for s in data["steps"] if s["version"] == requested]
    assert step["type"] == "ToolCallRequested" and step["tool"] == "log_decision"
