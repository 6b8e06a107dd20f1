"""Human approval of tool calls on the real ledger: a call the governance asks about parks its
run (nothing held in memory), the answer is recorded on the agent's stream, and the run resumes
from its recorded steps — on another host after a restart, too."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.agent_state import ApprovalClosed
from owlclaw.app import load_app
from owlclaw.audit.verify import ReplayReport, replay_run
from owlclaw.messages import AnswerApproval, Decision, Result, RunResult, Submit
from owlclaw.reports.approvals import pending
from owlclaw.runtime.app_code import AppCode
from owlclaw.runtime.approvals import ToolArgumentsInvalid, answer_directly
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.tools.stats import tool_stats
from projections import ProjectionRunner
from projections.tool_calls import AuditView
from tests.approvals import config, digest_of, park, resumed, trader

pytestmark = pytest.mark.integration


def run_events(ledger: Ledger, run_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(uuid.UUID(run_id))


def test_approved_after_the_host_stopped_the_call_runs_once_on_a_new_host(
    ledger: Ledger, tmp_path: Path
) -> None:
    app, orders = trader(tmp_path, "asker", 'ask_if = { place_order = "amount > 1000" }')
    ledger.register_agent("asker", app)
    run_id, approval_id = asyncio.run(park(ledger, "asker"))
    assert not orders.exists()  # nothing ran while parked
    kinds = [type(e).__name__ for e in run_events(ledger, run_id)]
    assert kinds[-1] == "RunParked" and "ToolCallRequested" not in kinds

    digest = digest_of(ledger, "asker", approval_id)
    answered = answer_directly(
        ledger, "asker", Decision(approval_id, True, "alice", "fine", digest=digest)
    )
    assert answered.status == "granted" and answered.run_id == run_id
    result = asyncio.run(resumed(ledger, "asker", run_id))
    assert result.status == "completed"
    assert orders.read_text() == "ACME 5000.0\n"  # exactly once
    events = run_events(ledger, run_id)
    assert [type(e).__name__ for e in events].count("ToolCallSucceeded") == 1
    assert "RunInterrupted" not in [type(e).__name__ for e in events]
    assert pending(ledger, ["asker"]) == []
    with pytest.raises(ApprovalClosed, match="already granted"):
        answer_directly(ledger, "asker", Decision(approval_id, False, "bob", digest=digest))
    assert verified(ledger, "asker", app).matched
    [row] = audit_rows(ledger, "asker")
    assert (row["status"], row["approval_status"], row["approved_by"]) == (
        "succeeded",
        "granted",
        "alice",
    )
    assert row["approval_reason"] == "ask_if: amount > 1000" and row["approval_wait_ms"] > 0


def test_denied_the_model_is_told_who_denied_it_and_the_run_ends_as_scripted(
    ledger: Ledger, tmp_path: Path
) -> None:
    app, orders = trader(tmp_path, "denied", 'ask = ["place_*"]')
    ledger.register_agent("denied", app)
    run_id, approval_id = asyncio.run(park(ledger, "denied"))
    digest = digest_of(ledger, "denied", approval_id)
    answer_directly(ledger, "denied", Decision(approval_id, False, "bob", "too big", None, digest))
    result = asyncio.run(resumed(ledger, "denied", run_id))
    assert result.status == "completed" and not orders.exists()
    [denied] = [e for e in run_events(ledger, run_id) if isinstance(e, ev.ToolCallDenied)]
    assert (denied.reason, denied.error_code) == ("denied by bob: too big", "APPROVAL_DENIED")
    told = RecordedRun(uuid.UUID(run_id), run_events(ledger, run_id)).settled(denied.call_id)
    assert told.error_code == "APPROVAL_DENIED"  # what a crash-resumed run tells the model again
    assert verified(ledger, "denied", app).matched
    [row] = audit_rows(ledger, "denied")
    assert (row["status"], row["approval_status"], row["approval_note"]) == (
        "denied",
        "denied",
        "too big",
    )
    [stats] = tool_stats(AuditView(ledger), "denied")
    assert stats.errors == {"APPROVAL_DENIED": 1}


def test_an_approval_nobody_answers_expires_as_a_denial(ledger: Ledger, tmp_path: Path) -> None:
    app, orders = trader(tmp_path, "expiry", 'ask = ["place_order"]\napproval_timeout_s = 0.2')
    ledger.register_agent("expiry", app)
    run_id, approval_id = asyncio.run(park(ledger, "expiry"))
    [waiting] = pending(ledger, ["expiry"])
    deadline = time.time() + 5
    while time.time() < deadline and waiting.expires_at >= _now_iso():
        time.sleep(0.05)
    with pytest.raises(ApprovalClosed, match="expired"):
        digest = digest_of(ledger, "expiry", approval_id)
        answer_directly(ledger, "expiry", Decision(approval_id, True, "alice", digest=digest))
    result = asyncio.run(resumed(ledger, "expiry", run_id))  # activation records the expiry
    assert result.status == "completed" and not orders.exists()
    agent_kinds = [type(e).__name__ for e in ledger.stream(ledger.load_agent("expiry").id)]
    assert agent_kinds.count("ApprovalExpired") == 1
    [denied] = [e for e in run_events(ledger, run_id) if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason.startswith("nobody approved the call before")


def test_edited_arguments_are_checked_against_the_tool_and_used(
    ledger: Ledger, tmp_path: Path
) -> None:
    app, orders = trader(tmp_path, "edited", 'ask = ["place_order"]')
    ledger.register_agent("edited", app)
    run_id, approval_id = asyncio.run(park(ledger, "edited"))

    async def answer(arguments: dict[str, object]) -> str:
        host = AgentHost(ledger, config("edited"))
        try:
            digest = digest_of(ledger, "edited", approval_id)
            decision = Decision(approval_id, True, "carol", arguments=arguments, digest=digest)
            answered = await host.ask(AnswerApproval(agent_id="edited", decision=decision))
            return (await host.ask(Result(agent_id="edited", run_id=answered.run_id))).status
        finally:
            await host.close()

    before = len(ledger.stream(ledger.load_agent("edited").id))
    with pytest.raises(ToolArgumentsInvalid, match="amount"):
        asyncio.run(answer({"symbol": "ACME", "amount": "a lot"}))
    assert len(ledger.stream(ledger.load_agent("edited").id)) == before  # nothing recorded
    assert asyncio.run(answer({"symbol": "ACME", "amount": 900})) == "completed"
    assert orders.read_text() == "ACME 900.0\n"
    [requested] = [e for e in run_events(ledger, run_id) if isinstance(e, ev.ToolCallRequested)]
    assert requested.arguments == {"symbol": "ACME", "amount": 900.0}


def test_calls_below_the_condition_do_not_wait(ledger: Ledger, tmp_path: Path) -> None:
    app, orders = trader(tmp_path, "small", 'ask_if = { place_order = "amount > 10000" }')
    ledger.register_agent("small", app)

    async def run() -> RunResult:
        host = AgentHost(ledger, config("small"))
        try:
            run_id = await host.ask(Submit(agent_id="small", trigger="webhook"))
            return await host.ask(Result(agent_id="small", run_id=run_id))
        finally:
            await host.close()

    assert asyncio.run(run()).status == "completed"
    assert orders.read_text() == "ACME 5000.0\n"
    assert pending(ledger, ["small"]) == []


def verified(ledger: Ledger, agent_id: str, app_dir: str) -> ReplayReport:
    """``owlclaw replay --verify`` of the agent's first run (parked, then resumed)."""
    app = load_app(Path(app_dir))
    assert app.handlers is not None
    registry = AppCode(5.0).load(app.handlers)
    return replay_run(ledger, agent_id, 1, app=app, registry=registry)


def audit_rows(ledger: Ledger, agent_id: str) -> list[dict[str, Any]]:
    view = AuditView(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    with view.transaction(commit=False) as curs:
        rows = curs.execute(
            view.sql("SELECT * FROM {audit_tool_calls} WHERE agent_id = %s"), (agent_id,)
        ).fetchall()
    return [dict(r) for r in rows]


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat()
