"""The console's memory, schedules, projections and approvals pages in a real headless Chromium,
against a real service: what they show comes from the ledger, and what an operator does there is
recorded as done by the logged-in principal."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from events import catalog as ev
from owlclaw.messages import Result, Submit
from projections import VIEWS
from tests.apps import make_app
from tests.browser import Console, logged_in
from tests.scripted import call

pytestmark = pytest.mark.integration

XSS = "<img src=x onerror=window.__xss=1>"
SCRIPT = "<script>window.__xss=2</script>"


def scripted_app(root: Path, steps: list[Any], extra: str = "") -> Path:
    """An app whose model plays ``steps`` (the scripted model, by the app's own name)."""
    name = root.name
    make_app(root, config=f'[agent]\nid = "{name}"\nmodels = ["scripted/{name}"]\n{extra}')
    (root / "scripts").mkdir()
    (root / "scripts" / f"{name}.json").write_text(json.dumps(steps))
    return root


def run_once(console: Console, agent_id: str, focus: str) -> str:
    """Trigger a run and wait for its end; its status."""
    service = console.service
    run_id = console.call(service.ask(Submit(agent_id=agent_id, trigger="webhook", focus=focus)))
    return console.call(service.ask(Result(agent_id=agent_id, run_id=run_id))).status


def agent_events(console: Console, agent_id: str) -> list[ev.LedgerEvent]:
    ledger = console.ledger
    return ledger.stream(ledger.load_agent(agent_id).id)


def test_memory_page_recalls_with_scores_and_renders_memory_md_with_its_html_as_text(
    console: Callable[..., Console], local_embedder: Any, tmp_path: Path
) -> None:
    keeper = scripted_app(
        tmp_path / "keeper",
        [
            {
                "tool_calls": [
                    call("remember", content="The ACME supply contract renews every March"),
                    call("remember", content=XSS, tags=[SCRIPT, XSS]),
                ]
            },
            {"content": "remembered"},
        ],
    )
    c = console(keeper)
    assert run_once(c, "keeper", "note the contract") == "completed"
    page = logged_in(c.page, c.url, c.token)
    page.goto(f"{c.url}/ui/memory/keeper")
    page.fill("input[name=q]", "when does the supply contract renew")
    page.click("form.search button[type=submit]")
    page.wait_for_selector("table.recall tr.memory")
    first = page.locator("table.recall tr.memory").first
    assert first.locator("td.content").inner_text() == "The ACME supply contract renews every March"
    assert 0 < float(first.locator("td.relevance").inner_text()) <= 1
    c.screenshot("memory")
    page.fill("input[name=q]", XSS)  # the query is echoed too
    page.click("form.search button[type=submit]")
    page.wait_for_selector("table.recall tr.memory")
    recalled = page.locator("table.recall tr.memory td.content").all_inner_texts()
    assert recalled[0] == XSS  # as text
    memory_md = page.locator("div.memory-md")  # MEMORY.md as Markdown, its HTML as text
    assert memory_md.locator("h1").inner_text() == "MEMORY.md — keeper"
    assert memory_md.locator("h2").count() == 2  # one per memory
    assert memory_md.locator("pre code").all_inner_texts()[1].strip() == XSS  # fenced
    assert memory_md.locator("p", has_text="tags:").all_inner_texts()[1] == f"tags: {SCRIPT}, {XSS}"
    assert XSS in page.locator("pre.memory-source").text_content()  # and its source
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    c.screenshot("memory-xss")
    page.goto(f"{c.url}/ui/memory/keeper?q=contract&limit=99")
    assert "limit '99': a whole number from 1 to 20" in page.inner_text("p.bad")
    assert page.locator("table.recall").count() == 0
    assert page.input_value("input[name=q]") == "contract"  # the query is kept


def test_cancel_a_schedule_from_the_console_is_recorded_with_the_operator(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    planner = scripted_app(
        tmp_path / "planner",
        [
            {"tool_calls": [call("schedule_once", delay_seconds=3600, focus="follow up")]},
            {"content": "scheduled"},
        ],
    )
    c = console(planner)
    assert run_once(c, "planner", "plan the follow-up") == "completed"
    [requested] = [e for e in agent_events(c, "planner") if isinstance(e, ev.ScheduleRequested)]
    page = logged_in(c.page, c.url, c.principal("alice", "operator:planner", "viewer"))
    page.goto(f"{c.url}/ui/schedules/planner")
    row = page.locator(f"table.active tr[data-schedule='{requested.schedule_id}']")
    assert "follow up" in row.inner_text()
    c.screenshot("schedules")
    cancel_url = f"{c.url}/ui/schedules/planner/{requested.schedule_id}/cancel"
    forged = page.request.post(cancel_url, headers={"Origin": "http://evil.example"})
    assert forged.status == 403  # another site posting through the logged-in browser
    too_long = page.request.post(
        cancel_url, headers={"Origin": c.url}, form={"reason": "x" * 501}, max_redirects=0
    )
    assert too_long.status == 303
    assert not any(isinstance(e, ev.ScheduleCancelled) for e in agent_events(c, "planner"))
    page.reload()
    assert "not cancelled: the reason is over 500 characters" in page.inner_text("p.flash.bad")
    row.locator("input[name=reason]").fill("no longer needed")
    row.locator("button[type=submit]").click()
    page.wait_for_selector("p.flash.ok")
    assert f"cancelled {requested.schedule_id} as alice" in page.inner_text("p.flash")
    past = page.locator(f"table.past tr[data-schedule='{requested.schedule_id}']")
    assert "cancelled by alice: no longer needed" in past.inner_text()
    [cancelled] = [e for e in agent_events(c, "planner") if isinstance(e, ev.ScheduleCancelled)]
    assert (cancelled.schedule_id, cancelled.by, cancelled.reason) == (
        requested.schedule_id,
        "alice",
        "no longer needed",
    )
    page.reload()  # the flash is shown once
    assert page.locator("p.flash").count() == 0
    c.screenshot("schedules-cancelled")

    page.goto(f"{c.url}/ui/projections")
    for name in VIEWS:
        assert page.locator(f"tr[data-projection='{name}']").count() == 1, name
    assert page.locator("tr[data-worker='timer-worker']").count() == 1
    c.screenshot("projections")


HANDLERS = """
from owlclaw import Registry

registry = Registry()


@registry.capability("Place an order.")
def place_order(symbol: str, amount: float) -> dict:
    return {"placed": symbol, "amount": amount}
"""


def test_approve_and_deny_parked_calls_from_the_console_and_the_runs_resume(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    trader = scripted_app(
        tmp_path / "trader",
        [
            {"tool_calls": [call("place_order", symbol="ACME", amount=5000)]},
            {"content": "ordered"},
        ],
        '\n[governance]\nask_if = { place_order = "amount > 1000" }\n',
    )
    (trader / "handlers.py").write_text(HANDLERS)
    c = console(trader)
    service = c.service
    run_id = c.call(service.ask(Submit(agent_id="trader", trigger="webhook", focus="buy ACME")))
    assert c.call(service.ask(Result(agent_id="trader", run_id=run_id))).status == "parked"
    page = logged_in(c.page, c.url, c.principal("alice", "approver:trader", "viewer:trader"))
    page.goto(f"{c.url}/ui/approvals")
    [approval] = service.pending_approvals()
    row = page.locator(f"tr[data-approval='{approval.approval_id}']")
    assert "place_order" in row.inner_text() and "ACME" in row.inner_text()
    named = row.locator("code.approval-id")  # whole, to copy; the prefix the CLI takes marked
    assert named.inner_text() == named.get_attribute("title") == approval.approval_id
    assert named.locator("b").inner_text() == approval.approval_id[:8]
    assert re.fullmatch(r"\d+ s ago", row.locator("time.requested").inner_text())
    assert row.locator("time.expires").inner_text() == "in 23 h"  # the default 24 h
    assert row.locator("time.expires").get_attribute("datetime") == approval.expires_at
    c.screenshot("approvals")
    row.locator("input[name=note]").fill("within limits")
    row.locator("button[value=approve]").click()
    page.wait_for_selector("p.flash.ok")
    assert f"granted {approval.approval_id} as alice" in page.inner_text("p.flash")
    assert c.call(service.ask(Result(agent_id="trader", run_id=run_id))).status == "completed"
    [granted] = [e for e in agent_events(c, "trader") if isinstance(e, ev.ApprovalGranted)]
    assert (granted.approval_id, granted.by, granted.note) == (
        approval.approval_id,
        "alice",
        "within limits",
    )
    run = c.ledger.stream(uuid.UUID(run_id))
    assert any(isinstance(e, ev.ToolCallSucceeded) and e.tool == "place_order" for e in run)
    assert page.locator("tr[data-approval]").count() == 0
    c.screenshot("approvals-answered")
    answer = answer_on_timeline(c, run_id)
    assert answer["title"] == "Resumed: approval granted by alice"
    assert answer["note"] == "within limits" and answer["approval"] == approval.approval_id

    again = c.call(
        service.ask(Submit(agent_id="trader", trigger="webhook", focus="buy ACME again"))
    )
    assert c.call(service.ask(Result(agent_id="trader", run_id=again))).status == "parked"
    [second] = service.pending_approvals()
    page.goto(f"{c.url}/ui/approvals")
    row = page.locator(f"tr[data-approval='{second.approval_id}']")
    row.locator("input[name=note]").fill("over the limit today")
    row.locator("button[value=deny]").click()
    page.wait_for_selector("p.flash.ok")
    assert f"denied {second.approval_id} as alice" in page.inner_text("p.flash")
    assert c.call(service.ask(Result(agent_id="trader", run_id=again))).status == "completed"
    [denied] = [e for e in agent_events(c, "trader") if isinstance(e, ev.ApprovalDenied)]
    assert (denied.approval_id, denied.by, denied.note) == (
        second.approval_id,
        "alice",
        "over the limit today",
    )
    run = c.ledger.stream(uuid.UUID(again))
    assert not any(isinstance(e, ev.ToolCallSucceeded) for e in run)
    answer = answer_on_timeline(c, again)
    assert answer["title"] == "Resumed: approval denied by alice"
    assert answer["note"] == "over the limit today" and answer["approval"] == second.approval_id
    c.screenshot("run-denied")


def answer_on_timeline(c: Console, run_id: str) -> dict[str, str]:
    """The run page's step where the run went on after its approval was answered."""
    c.page.goto(f"{c.url}/ui/agents/trader/runs/{run_id}")
    c.page.locator("ol.timeline[data-ended=true]").wait_for()
    step = c.page.locator(".step.answer")
    facts = dict(
        zip(step.locator("dt").all_inner_texts(), step.locator("dd").all_inner_texts(), strict=True)
    )
    return {
        "title": step.locator(".kind").inner_text(),
        "approval": facts["approval"],
        "note": step.locator(".block", has_text="note").locator("pre").inner_text(),
    }
