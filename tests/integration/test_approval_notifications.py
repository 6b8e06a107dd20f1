"""The outbound notice of approval requests: at least once, retried, deduplicable by the
approval id, and parked (not lost) while the receiver keeps refusing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from events import Ledger
from projections import ApprovalNotifications, ProjectionRunner
from projections.retry import retry_parked
from tests.webhooks import Receiver

pytestmark = pytest.mark.integration


def request_approval(ledger: Ledger, agent_id: str) -> str:
    agent = ledger.register_agent(agent_id)
    approval_id = agent.request_approval(
        uuid.uuid4(), "c1", "place_order", {"amount": 5000}, "ask_if: amount > 1000", [], 3600
    )
    ledger.append(agent)
    return approval_id


def rows(view: ApprovalNotifications) -> dict[str, dict[str, Any]]:
    with view.transaction(commit=False) as curs:
        found = curs.execute(view.sql("SELECT * FROM {approval_notifications}")).fetchall()
    return {r["approval_id"]: dict(r) for r in found}


def test_a_request_is_retried_until_delivered_and_names_itself_for_deduplication(
    ledger: Ledger, receiver: Receiver
) -> None:
    approval_id = request_approval(ledger, "notified")
    receiver.statuses = [503]  # the receiver is briefly down
    view = ApprovalNotifications(ledger, url=receiver.url, attempts=3)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    assert [key for key, _, _ in receiver.received] == [approval_id, approval_id]
    body = receiver.received[-1][2]
    assert (body["agent_id"], body["tool"], body["arguments"]) == (
        "notified",
        "place_order",
        {"amount": 5000},
    )
    assert rows(view)[approval_id]["http_status"] == 200


def test_a_receiver_that_keeps_refusing_parks_the_request_until_it_is_retried(
    ledger: Ledger, receiver: Receiver
) -> None:
    approval_id = request_approval(ledger, "refused")
    receiver.statuses = [500] * 100
    view = ApprovalNotifications(ledger, url=receiver.url, attempts=1)
    view.create_table()
    runner = ProjectionRunner(ledger, view)
    runner.catch_up()
    assert approval_id not in rows(view)
    assert runner.status().parked_count == 1
    receiver.statuses = []  # fixed
    [outcome] = retry_parked(ledger, view)
    assert outcome.error is None
    assert rows(view)[approval_id]["http_status"] == 200
    assert receiver.received[-1][0] == approval_id


def test_without_a_url_nothing_is_sent_and_the_view_says_why(ledger: Ledger) -> None:
    approval_id = request_approval(ledger, "quiet")
    view = ApprovalNotifications(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    assert rows(view)[approval_id]["not_sent"] == "no approvals.notify_url configured"
