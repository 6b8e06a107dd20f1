"""A run's page in a real browser: triggered through the webhook while its page is open, the
timeline fills in as the run commits (no reload), attacker-controlled text in the focus, the
payload, the tool arguments and the answer is shown as text, never run, and a message the run
sent shows its delivery as the outbox settles it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from events import catalog as ev
from owlclaw import tracing
from owlclaw.messages import Result, Submit
from projections import RunsView
from tests.browser import Console, logged_in, scripted_app
from tests.langfuse_receiver import PROJECT_ID, Receiver
from tests.waiting import wait_for
from tests.webhooks import Receiver as Webhook

pytestmark = pytest.mark.integration

XSS = "<img src=x onerror=window.__xss=1>"


def test_a_triggered_run_fills_its_timeline_live_and_renders_payloads_as_text(
    console: Callable[..., Console], tmp_path: Path, langfuse: Receiver
) -> None:
    steps = [
        {"tool_calls": [{"name": "remember", "arguments": {"content": XSS}}]},
        {"content": f"answer {XSS}"},
    ]
    app = scripted_app(tmp_path / "desk", "desk", steps, governance='ask = ["remember"]')
    served = console(app)
    page, url = logged_in(served.page, served.url, served.token), served.url
    bearer = {"Authorization": f"Bearer {served.token}"}
    with httpx.Client(base_url=url, headers=bearer, trust_env=False) as http:
        accepted = http.post("/agents/desk/trigger", json={"focus": XSS, "payload": {"x": XSS}})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]

        page.goto(f"{url}/ui/agents/desk/runs/{run_id}")
        page.evaluate("window.__opened = 'once'")
        page.locator(".step.parked").wait_for()  # the run waits for a person: not ended yet
        assert page.locator(".step.end").count() == 0
        agents = page.context.new_page()
        agents.goto(f"{url}/ui/")
        assert agents.locator("tr[data-agent=desk] .state").inner_text() == "parked"
        agents.close()
        [approval] = served.service.pending_approvals()
        answer = http.post(
            f"/approvals/{approval.approval_id}",
            json={"decision": "approve", "digest": approval.digest},
        )
        assert answer.status_code == 200, answer.text

        page.locator(".step.end").wait_for()  # arrives on the open page
        page.locator("ol.timeline[data-ended=true]").wait_for()
    assert page.evaluate("window.__opened") == "once"  # the same document: no reload
    links_to_its_trace(page, langfuse, run_id)
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img").count() == 0
    titles = page.locator(".step .kind").all_inner_texts()
    assert titles[0] == "Run started" and titles[-1] == "Run completed"
    for title in ("Tools", "LLM response", "Tool call remember", "Tool result remember"):
        assert title in titles
    started, ended = page.locator(".step").first, page.locator(".step.end")
    assert XSS in started.inner_text() and f'"x": "{XSS}"' in started.inner_text()
    assert f"answer {XSS}" in ended.inner_text()
    request = page.locator(".step.tool", has_text="Tool call remember")
    assert XSS in request.inner_text()
    versions = page.locator(".step").evaluate_all("s => s.map(e => Number(e.dataset.version))")
    run_events = served.ledger.stream(uuid.UUID(run_id))
    assert versions == [e.originator_version for e in run_events]  # each step once, in order
    served.screenshot("console-run")

    resumes_after_the_last_event_id(served, run_id, versions)
    runs = served.service.view(RunsView)
    wait_for(
        lambda: any(r.status == "completed" for r in runs.of_agent("desk")),
        "the runs view to absorb the run",
    )
    page.goto(f"{url}/ui/agents/desk/runs")
    row = page.locator(f"tr[data-run='{run_id}']")
    assert "completed" in row.inner_text() and XSS in row.inner_text()
    served.screenshot("runs")
    page.goto(f"{url}/ui/")
    agent_row = page.locator("tr[data-agent=desk]")
    assert agent_row.locator(".state").inner_text() == "idle"
    assert "1 of 1" in agent_row.inner_text()
    assert isinstance(run_events[-1], ev.RunCompleted)


def links_to_its_trace(page: Page, langfuse: Receiver, run_id: str) -> None:
    """With tracing on, the run page links to the run's trace, and that trace reached Langfuse."""
    trace_id = tracing.trace_id_of(uuid.UUID(run_id))
    link = page.locator("a.trace").get_attribute("href")
    assert link == f"{langfuse.url}/project/{PROJECT_ID}/traces/{trace_id}"
    tracing.flush()
    assert trace_id in {span.trace_id for span in langfuse.received}


def resumes_after_the_last_event_id(served: Console, run_id: str, versions: list[int]) -> None:
    """A reconnecting browser sends the last id it saw and gets only the steps after it."""
    session = {c["name"]: c["value"] for c in served.page.context.cookies()}
    with httpx.Client(base_url=served.url, cookies=session, trust_env=False) as http:
        stream = f"/ui/api/agents/desk/runs/{run_id}/events"
        resumed = http.get(stream, headers={"Last-Event-ID": str(versions[-2])})
        assert resumed.headers["Content-Type"].startswith("text/event-stream")
        ids = [line for line in resumed.text.splitlines() if line.startswith("id: ")]
        assert ids == [f"id: {versions[-1]}"]
        assert "event: end" in resumed.text
        assert http.get(f"/ui/agents/desk/runs/{uuid.uuid4()}").status_code == 404
        assert http.get("/ui/agents/nobody/runs").status_code == 404


def test_the_server_stops_promptly_while_a_live_run_page_is_open(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    steps = [{"tool_calls": [{"name": "remember", "arguments": {"content": "x"}}]}]
    app = scripted_app(tmp_path / "desk", "desk", steps, governance='ask = ["remember"]')
    served = console(app)
    page = logged_in(served.page, served.url, served.token)
    run_id = served.call(
        served.service.ask(Submit(agent_id="desk", trigger="webhook", focus="wait for me"))
    )
    page.goto(f"{served.url}/ui/agents/desk/runs/{run_id}")
    page.locator(".step.parked").wait_for()  # the stream stays open: the run has not ended
    started = time.monotonic()
    served.stop_service()
    assert time.monotonic() - started < 40  # not aiohttp's 60 s wait for open handlers


def test_a_sent_message_shows_its_delivery_and_the_open_page_follows_the_outbox(
    console: Callable[..., Console], tmp_path: Path, receiver: Webhook
) -> None:
    receiver.hold_first = True  # the first attempt hangs until released: delivery pending
    tools = (
        f'[tools]\nenable = ["send_message"]\n'
        f'[tools.channels.ops]\nurl = "{receiver.url}"\ntimeout_s = 60\n'
        '[tools.channels.pager]\nurl = "http://127.0.0.1:9/closed"\nattempts = 2\n'
    )
    steps = [
        {"tool_calls": [{"name": "send_message", "arguments": {"channel": "ops", "text": XSS}}]},
        {"tool_calls": [{"name": "send_message", "arguments": {"channel": "pager", "text": "x"}}]},
        {"content": "told them"},
    ]
    app = scripted_app(tmp_path / "herald", "herald", steps)
    with (app / "owlclaw.toml").open("a") as config:
        config.write(tools)
    served = console(app)
    run_id = served.call(
        served.service.ask(Submit(agent_id="herald", trigger="webhook", focus="tell ops"))
    )
    assert (
        served.call(served.service.ask(Result(agent_id="herald", run_id=run_id))).status
        == "completed"
    )
    assert receiver.holding.wait(30)
    page = logged_in(served.page, served.url, served.token)
    page.goto(f"{served.url}/ui/agents/herald/runs/{run_id}")
    page.evaluate("window.__opened = 'once'")
    ops = page.locator(".step.message", has_text="Message sent via ops")
    assert ops.locator(".delivery").inner_text() == "pending · not sent yet"
    assert XSS in ops.locator("pre").inner_text()
    assert page.locator("ol.timeline[data-ended]").count() == 0  # waits for the outbox
    served.screenshot("message-pending")

    receiver.release.set()  # that attempt fails (no answer); the retry is accepted
    page.locator("ol.timeline[data-ended=true]").wait_for()
    assert page.evaluate("window.__opened") == "once"  # updated in place: no reload
    assert ops.locator(".delivery").inner_text() == "delivered · HTTP 200 after 2 attempts"
    pager = page.locator(".step.message", has_text="Message sent via pager").locator(".delivery")
    assert pager.inner_text().startswith("failed · after 2 attempts: ConnectError")
    assert page.locator(".delivery").count() == 2
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img").count() == 0
    served.screenshot("message-delivered")
    page.reload()
    page.locator("ol.timeline[data-ended=true]").wait_for()
    shown = page.locator(".delivery").all_inner_texts()
    assert shown[0] == "delivered · HTTP 200 after 2 attempts"
    assert shown[1].startswith("failed · after 2 attempts")


def test_the_run_page_shows_the_runs_current_plan_and_each_update_as_a_step(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    def plan(*items: dict[str, str]) -> dict[str, object]:
        return {"tool_calls": [{"name": "update_plan", "arguments": {"items": list(items)}}]}

    steps = [
        plan({"text": "read the queue"}, {"text": f"reply {XSS}"}),
        plan(
            {"text": "read the queue", "status": "done"},
            {"text": f"reply {XSS}", "status": "in_progress"},
        ),
        {"content": "planned"},
    ]
    served = console(scripted_app(tmp_path / "planner", "planner", steps))
    page = logged_in(served.page, served.url, served.token)
    run_id = served.call(served.service.ask(Submit(agent_id="planner", trigger="webhook")))
    assert served.call(served.service.ask(Result(agent_id="planner", run_id=run_id))).status == (
        "completed"
    )
    page.goto(f"{served.url}/ui/agents/planner/runs/{run_id}")
    assert page.locator(".plan li").all_inner_texts() == [
        "done read the queue",
        f"in progress reply {XSS}",
    ]
    assert page.locator(".plan li.done").inner_text() == "done read the queue"
    page.locator("ol.timeline[data-ended=true]").wait_for()
    updates = page.locator(".step", has_text="Plan updated")
    assert updates.count() == 2
    assert "1 of 2" in updates.nth(1).inner_text()
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img").count() == 0

    agent = served.ledger.load_agent("planner")  # accepted, not started: its stream is empty
    queued = agent.queue_run("webhook")
    served.ledger.append(agent)
    opened = page.goto(f"{served.url}/ui/agents/planner/runs/{queued.run_id}")
    assert opened is not None and opened.status == 200
    assert page.locator(".plan").count() == 0 and page.locator("ol.timeline").count() == 1
