"""The ledger page in a real browser: an agent's events in log order with each stream's
hash-chain status; after an event is altered in PostgreSQL the page names that event, and after
a run's last event is deleted, the run whose stream no longer matches its seal."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from events import catalog as ev
from owlclaw.messages import Result, Submit
from owlclaw.server.console.pages import ledger as ledger_page
from tests.browser import Console, logged_in, scripted_app

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.integration

XSS = "<img src=x onerror=window.__xss=1>"


def shown_positions(page: Page) -> list[int]:
    positions: list[int] = page.locator("table.events tbody tr").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.position))"
    )
    return positions


def test_the_ledger_page_names_the_event_altered_in_the_database(
    console: Callable[..., Console], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = console(scripted_app(tmp_path / "desk", "desk", [{"content": "all quiet"}]))
    service = served.service
    run_id = served.call(service.ask(Submit(agent_id="desk", trigger="webhook", focus=XSS)))
    assert served.call(service.ask(Result(agent_id="desk", run_id=run_id))).status == "completed"
    page, url = logged_in(served.page, served.url, served.token), served.url

    history = served.ledger.agent_history("desk")
    monkeypatch.setattr(ledger_page, "PAGE_EVENTS", 4)  # the server runs in this process
    page.goto(f"{url}/ui/ledger/desk")
    assert page.locator("[data-chain=ok]").is_visible()
    latest = shown_positions(page)
    page.click("text=first")
    assert shown_positions(page) + latest == [h.position for h in history]  # log order, all
    assert len(latest) == len(history) - 4  # the latest page first
    types = page.locator("table.events tbody tr td:nth-child(4)").all_inner_texts()
    assert types == [type(h.event).__name__ for h in history[:4]]
    assert XSS in page.locator("table.events").inner_text()
    assert page.evaluate("typeof window.__xss") == "undefined"

    [completed] = [
        e for e in served.ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.RunCompleted)
    ]
    with psycopg.connect(served.config.database_url, autocommit=True) as conn:
        altered = conn.execute(
            "UPDATE ledger_events SET state = convert_to(regexp_replace(convert_from(state,"
            ' \'UTF8\'), \'"answer":"[^"]*"\', \'"answer":"all clear"\'), \'UTF8\')'
            " WHERE originator_id = %s AND originator_version = %s",
            (completed.originator_id, completed.originator_version),
        )
        assert altered.rowcount == 1

    page.goto(f"{url}/ui/ledger/desk?page=2")
    [named] = page.locator("[data-chain=broken] li.break").all()
    assert (named.get_attribute("data-stream"), named.get_attribute("data-version")) == (
        run_id,
        str(completed.originator_version),
    )
    assert f"stream {run_id} version {completed.originator_version}" in named.inner_text()
    broken_rows = page.locator("table.events tr.broken")
    assert broken_rows.count() == 1 and "RunCompleted" in broken_rows.inner_text()
    assert "all clear" in broken_rows.inner_text()  # what the altered row now says
    streams = page.locator("table.streams tr.broken")
    assert streams.count() == 1 and streams.get_attribute("data-stream") == run_id
    served.screenshot("ledger-broken")

    with psycopg.connect(served.config.database_url, autocommit=True) as conn:
        conn.execute(  # the run's end, whole: its chain holds again, its seal does not
            "DELETE FROM ledger_events WHERE originator_id = %s AND originator_version = %s",
            (completed.originator_id, completed.originator_version),
        )
    page.goto(f"{url}/ui/ledger/desk")
    assert page.locator("[data-chain=broken] li.break").count() == 0
    [deleted] = page.locator("[data-chain=broken] li.mismatch").all()
    assert deleted.get_attribute("data-stream") == run_id
    assert "agent desk run 1" in deleted.inner_text() and "tail was deleted" in deleted.inner_text()
    assert page.locator("table.streams tr.broken").get_attribute("data-stream") == run_id


def test_an_agent_stream_that_does_not_decode_is_named_on_its_row_and_its_ledger_page(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    served = console(scripted_app(tmp_path / "desk", "desk", [{"content": "all quiet"}]))
    service = served.service
    run_id = served.call(service.ask(Submit(agent_id="desk", trigger="webhook", focus="check")))
    assert served.call(service.ask(Result(agent_id="desk", run_id=run_id))).status == "completed"
    agent = served.ledger.load_agent("desk")
    [queued] = [e for e in served.ledger.stream(agent.id) if isinstance(e, ev.RunQueued)]
    with psycopg.connect(served.config.database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ledger_events SET state = convert_to('{not json', 'UTF8')"
            " WHERE originator_id = %s AND originator_version = %s",
            (agent.id, queued.originator_version),
        )
    page, url = logged_in(served.page, served.url, served.token), served.url
    row = page.locator("tr[data-agent=desk]")
    assert row.locator(".state").inner_text() == "unreadable"
    assert "owlclaw verify desk" in row.locator(".error").inner_text()
    served.screenshot("agents-unreadable")

    page.goto(f"{url}/ui/ledger/desk")
    [named] = page.locator("[data-chain=broken] li.break").all()
    assert named.get_attribute("data-stream") == str(agent.id)
    assert named.get_attribute("data-version") == str(queued.originator_version)
    assert "cannot be read" in page.locator("p.error").inner_text()
