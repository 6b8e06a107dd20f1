"""A run's page in a real browser: triggered through the webhook while its page is open, the
timeline fills in as the run commits (no reload), and attacker-controlled text in the focus,
the payload, the tool arguments and the answer is shown as text, never run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from events import catalog as ev
from projections import RunsView
from tests.browser import Console, logged_in, scripted_app
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

XSS = "<img src=x onerror=window.__xss=1>"


def test_a_triggered_run_fills_its_timeline_live_and_renders_payloads_as_text(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    steps = [
        {"tool_calls": [{"name": "remember", "arguments": {"content": XSS}}]},
        {"content": f"answer {XSS}"},
    ]
    app = scripted_app(tmp_path / "desk", "desk", steps, governance='ask = ["remember"]')
    served = console(app)
    page, url = logged_in(served.page, served.url, served.token, "alice"), served.url
    bearer = {"Authorization": f"Bearer {served.token}"}
    with httpx.Client(base_url=url, headers=bearer, trust_env=False) as http:
        accepted = http.post("/agents/desk/trigger", json={"focus": XSS, "payload": {"x": XSS}})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]

        page.goto(f"{url}/ui/agents/desk/runs/{run_id}")
        page.evaluate("window.__opened = 'once'")
        page.locator(".step.parked").wait_for()  # the run waits for a person: not ended yet
        assert page.locator(".step.end").count() == 0
        [approval] = served.service.pending_approvals()
        answer = http.post(f"/approvals/{approval.approval_id}", json={"decision": "approve"})
        assert answer.status_code == 200, answer.text

        page.locator(".step.end").wait_for()  # arrives on the open page
        page.locator("ol.timeline[data-ended=true]").wait_for()
    assert page.evaluate("window.__opened") == "once"  # the same document: no reload
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
