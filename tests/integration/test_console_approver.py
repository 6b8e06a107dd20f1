"""Issue 38's browser test: an approver logs in to the console with their own token (no name is
typed), grants a parked call, and the ledger, on the console's ledger page too, shows their
principal id on the grant; a page outside their roles is a 403 naming the missing role."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from events import catalog as ev
from owlclaw.messages import Result, Submit
from tests.approvals import HANDLERS
from tests.browser import Console, logged_in, scripted_app
from tests.scripted import call

pytestmark = pytest.mark.integration


def test_an_approver_logs_in_with_their_token_and_the_grant_is_recorded_by_them(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    app = scripted_app(
        tmp_path / "trader",
        "trader",
        [{"tool_calls": [call("place_order", symbol="ACME", amount=5)]}, {"content": "ordered"}],
        governance='ask = ["place_order"]',
    )
    (app / "handlers.py").write_text(HANDLERS.format(orders=str(tmp_path / "orders.txt")))
    c = console(app)
    run_id = c.call(c.service.ask(Submit(agent_id="trader", trigger="webhook", focus="buy")))
    assert c.call(c.service.ask(Result(agent_id="trader", run_id=run_id))).status == "parked"
    [approval] = c.service.pending_approvals()
    token = c.principal("ana", "approver:trader", "viewer:trader")

    page = logged_in(c.page, c.url, token)
    assert page.inner_text(".principal") == "ana"
    page.goto(f"{c.url}/ui/approvals")
    row = page.locator(f"tr[data-approval='{approval.approval_id}']")
    row.locator("input[name=note]").fill("checked the amount")
    row.locator("button[value=approve]").click()
    page.wait_for_selector("p.flash.ok")
    assert f"granted {approval.approval_id} as ana" in page.inner_text("p.flash")
    assert c.call(c.service.ask(Result(agent_id="trader", run_id=run_id))).status == "completed"

    agent = c.ledger.load_agent("trader")
    [granted] = [e for e in c.ledger.stream(agent.id) if isinstance(e, ev.ApprovalGranted)]
    assert (granted.approval_id, granted.by) == (approval.approval_id, "ana")
    page.goto(f"{c.url}/ui/ledger/trader")
    shown = page.locator("table.events tr", has_text="ApprovalGranted")
    assert '"by": "ana"' in shown.inner_text()
    c.screenshot("approver-grant-in-ledger")

    forbidden = page.request.post(
        f"{c.url}/ui/schedules/trader/none/cancel", headers={"Origin": c.url}
    )
    assert forbidden.status == 403
    assert "ana may not schedules.change: it needs role operator" in forbidden.text()
    overview = page.goto(f"{c.url}/ui/overview")
    assert overview is not None and overview.status == 403
    assert "it needs role viewer on every agent" in page.inner_text("p.error")


def test_an_approver_answers_a_question_with_one_of_its_options(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    """ask_human's question shows its text and one button per option; the click is the answer
    the run resumes with, recorded as the logged-in principal's."""
    question = call("ask_human", question="Hold or sell ACME?", options=["hold", "sell"])
    app = scripted_app(tmp_path / "desk", "desk", [{"tool_calls": [question]}, {"content": "ok"}])
    c = console(app)
    run_id = c.call(c.service.ask(Submit(agent_id="desk", trigger="webhook", focus="ask")))
    assert c.call(c.service.ask(Result(agent_id="desk", run_id=run_id))).status == "parked"
    [asked] = c.service.pending_approvals()
    token = c.principal("ana", "approver:desk", "viewer:desk")

    page = logged_in(c.page, c.url, token)
    page.goto(f"{c.url}/ui/approvals")
    row = page.locator(f"tr[data-approval='{asked.approval_id}']")
    assert "Hold or sell ACME?" in row.inner_text()
    assert row.locator("button[value=approve]").count() == 0
    row.locator("button[value=sell]").click()
    page.wait_for_selector("p.flash.ok")
    assert f"answered 'sell' to {asked.approval_id} as ana" in page.inner_text("p.flash")
    assert c.call(c.service.ask(Result(agent_id="desk", run_id=run_id))).status == "completed"
    agent = c.ledger.load_agent("desk")
    [granted] = [e for e in c.ledger.stream(agent.id) if isinstance(e, ev.ApprovalGranted)]
    assert (granted.answer, granted.by) == ("sell", "ana")
