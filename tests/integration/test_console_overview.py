"""The overview page in a real browser: a week of two agents' runs drawn per day and agent
(runs, tool calls, tokens, cost) from the runs view, a timer's lateness from the schedules view
and every projection's lag, each value kept as text (a bar's title, the numbers table)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from events.streams import run_stream_id
from owlclaw.messages import Result, Submit
from projections import VIEWS, RunsView
from tests.apps import make_app
from tests.browser import Console, logged_in
from tests.scripted import call
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def app_playing(root: Path, script: dict[str, Any]) -> Path:
    """An app (named after ``root``) whose scripted model plays ``script``."""
    name = root.name
    make_app(root, config=f'[agent]\nid = "{name}"\nmodels = ["scripted/{name}"]\n')
    (root / "scripts").mkdir()
    (root / "scripts" / f"{name}.json").write_text(json.dumps(script))
    return root


def record_run_days_ago(ledger: Ledger, agent_id: str, days: int, tool_calls: int) -> date:
    """A run of ``agent_id`` as the runtime records one, started ``days`` ago: 1000 tokens for
    $0.25 and ``tool_calls`` calls. Its day."""
    at = datetime.now(UTC) - timedelta(days=days)
    stream = run_stream_id(agent_id, 1000)

    def head(version: int) -> dict[str, Any]:
        return {"originator_id": stream, "originator_version": version, "timestamp": at}

    ledger.append_events(
        [
            ev.RunStarted(agent_id=agent_id, run_no=1000, trigger="webhook", **head(1)),
            ev.LLMResponded(
                model="gpt-x", message={}, usage={"total_tokens": 1000}, cost_usd=0.25, **head(2)
            ),
            *(
                ev.ToolCallRequested(call_id=f"c{n}", tool="recall", arguments={}, **head(3 + n))
                for n in range(tool_calls)
            ),
            ev.RunCompleted(**head(3 + tool_calls)),
        ]
    )
    return at.date()


def run_once(console: Console, agent_id: str, focus: str) -> datetime:
    """Trigger a run, wait for its end; when it started."""
    service = console.service
    run_id = console.call(service.ask(Submit(agent_id=agent_id, trigger="webhook", focus=focus)))
    assert console.call(service.ask(Result(agent_id=agent_id, run_id=run_id))).status == "completed"
    return console.ledger.stream(uuid.UUID(run_id))[0].timestamp


def test_the_overview_draws_a_week_of_runs_per_agent_and_day(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    alpha = app_playing(
        tmp_path / "alpha",
        {
            "cases": [
                {
                    "when": "plan the week",
                    "steps": [
                        {"tool_calls": [call("schedule_once", delay_seconds=1, focus="check in")]},
                        {"content": "planned"},
                    ],
                },
                {
                    "when": "do the work",
                    "steps": [
                        {
                            "tool_calls": [
                                call("log_decision", reasoning="r", decision_type="other")
                            ]
                        },
                        {"content": "done"},
                    ],
                },
            ]
        },
    )
    beta = app_playing(tmp_path / "beta", {"steps": [{"content": "hello"}]})
    c = console(alpha, beta)
    started = [run_once(c, "alpha", "do the work"), run_once(c, "alpha", "plan the week")]
    started.append(run_once(c, "beta", "say hello"))
    runs = c.service.view(RunsView)
    wait_for(  # the timer fires a third run of alpha ("check in": the script's final answer)
        lambda: sum(r.status == "completed" for r in runs.of_agent("alpha")) == 3,
        "alpha's timer to fire its run",
    )
    [fired] = runs.of_agent("alpha", 1)
    started.append(fired.started_at)
    today = started[0].astimezone(UTC).date()
    assert {s.astimezone(UTC).date() for s in started} == {today}  # not across midnight
    earlier = record_run_days_ago(c.ledger, "alpha", 3, tool_calls=4)

    page = logged_in(c.page, c.url, c.token)
    page.click("nav a[href='/ui/overview']")
    page.wait_for_url(f"{c.url}/ui/overview")
    c.screenshot("overview")

    def bar(chart: str, agent: str, day: date) -> str | None:
        rect = page.locator(
            f"svg[data-chart={chart}] rect[data-series='{agent}'][data-day='{day}']"
        )
        return rect.locator("title").text_content() if rect.count() else None

    # alpha today: 2 tool calls (log_decision, schedule_once), 3 runs of 2, 2 and 1 LLM calls
    # of 120 tokens; beta today: 1 run of one answer; alpha 3 days ago: the recorded run
    expected = {
        ("alpha", today): {"runs": 3, "tool_calls": 2, "tokens": 600, "cost_usd": None},
        ("beta", today): {"runs": 1, "tool_calls": None, "tokens": 120, "cost_usd": None},
        ("alpha", earlier): {"runs": 1, "tool_calls": 4, "tokens": 1000, "cost_usd": "$0.2500"},
    }
    titles = {"runs": "Runs", "tool_calls": "Tool calls", "tokens": "Tokens", "cost_usd": "Cost"}
    for (agent, day), values in expected.items():
        for chart, value in values.items():
            shown = f"{agent} · {day} · {titles[chart]}: {value}" if value is not None else None
            assert bar(chart, agent, day) == shown, (chart, agent, day)  # None: no bar (zero)
    assert page.locator("figure.chart figcaption").all_text_contents() == [
        "Runs per day",
        "Tool calls per day",
        "Tokens per day",
        "Cost per day",
        "Timer lateness: the slowest fire of each day",
    ]
    days = [today - timedelta(days=n) for n in range(6, -1, -1)]
    assert page.locator("svg[data-chart=runs] text.day").all_text_contents() == [
        d.strftime("%a %d %b") for d in days
    ]
    totals = page.locator("svg[data-chart=runs] text.total").all_text_contents()
    assert totals == ["1" if d == earlier else "4" if d == today else "0" for d in days]
    legend = page.locator("svg[data-chart=runs] + .legend li").all_text_contents()
    assert [name.strip() for name in legend] == ["alpha", "beta"]  # the busiest first

    row = page.locator(f"table.week tr[data-day='{today}'][data-agent=alpha]")
    assert row.locator("td.runs").text_content() == "3"
    assert row.locator("td.tokens").text_content() == "600"
    row = page.locator(f"table.week tr[data-day='{earlier}'][data-agent=alpha]")
    assert row.locator("td.cost").text_content() == "$0.2500"
    assert "5 runs · 6 tool calls · 1720 tokens · $0.2500" in page.locator("p.summary").inner_text()

    fires = page.locator(f"svg[data-chart=lateness] rect[data-day='{today}'] title")
    assert (fires.text_content() or "").startswith(f"{today} · fires: 1, median lateness ")
    assert page.locator(f"table.fires tr[data-day='{today}'] td.fires").text_content() == "1"
    for name in VIEWS:
        lag = page.locator(f"table.lag tr[data-projection={name}] td.events").text_content()
        assert lag is not None and lag.isdigit(), name
    assert page.locator("main script, main img").count() == 0  # drawn by the server: no script
