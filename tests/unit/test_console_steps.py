"""How the console's run timeline shows events: tool results cut to a readable length, hidden
tools with the reason, the recorded inputs of a decision, a parked run named by what it awaits,
who answered it, and how a sent message was delivered."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from events import catalog as ev
from owlclaw.server.console.pages.approvals import expiry
from owlclaw.server.console.steps import RESULT_CHARS, Delivery, delivery_of, resumed, step_of, text
from projections.outbox import Outcome
from projections.tool_calls import ApprovalAnswer

HEADER: dict[str, Any] = {
    "originator_id": uuid.uuid4(),
    "originator_version": 5,
    "timestamp": datetime(2026, 11, 27, 7, 0, tzinfo=UTC),
}


def test_a_long_tool_result_is_cut_and_says_how_much_is_left() -> None:
    result = "r" * (RESULT_CHARS + 500)
    step = step_of(ev.ToolCallSucceeded(call_id="c1", tool="web_fetch", result=result, **HEADER))
    [(label, shown)] = step.blocks
    assert label == "result" and shown.startswith("r" * RESULT_CHARS)
    assert shown.endswith("… (500 more characters)")
    assert (step.kind, step.version) == ("tool", 5)
    assert text("short", RESULT_CHARS) == "short"


def test_hidden_tools_are_listed_with_why() -> None:
    step = step_of(
        ev.VisibleToolsResolved(
            tools=["recall"], filtered={"place_order": "denied by [governance]"}, **HEADER
        )
    )
    assert step.facts == [("visible tools", "recall")]
    assert step.blocks == [("hidden", "place_order: denied by [governance]")]


def test_a_decision_shows_its_recorded_inputs_with_memory_scores() -> None:
    memory = str(uuid.uuid4())
    step = step_of(
        ev.LLMResponded(
            model="scripted/a",
            message={"content": "ok", "tool_calls": [{"function": {"name": "recall"}}]},
            usage={"prompt_tokens": 90, "completion_tokens": 10, "total_tokens": 100},
            cost_usd=0.0012,
            latency_ms=250.4,
            inputs={"soul_sha256": "ab", "memories": {memory: 0.8123}, "skills": ["entry"]},
            **HEADER,
        )
    )
    facts = dict(step.facts)
    assert facts["tokens"] == "100 (90 in, 10 out)"
    assert (facts["cost"], facts["latency"]) == ("$0.001200", "250 ms")
    blocks = dict(step.blocks)
    assert blocks["response"] == "ok" and "calls recall" in blocks
    assert blocks["soul sha256"] == "ab"
    assert blocks["recalled memories"] == f"{memory}  score 0.812"
    assert '"entry"' in blocks["skills"]


def test_a_decision_shows_what_the_prompt_budget_trimmed() -> None:
    inputs = {"prompt_tokens": 7990, "trimmed": {"memories": ["m4", "m5"], "recent_activity": [12]}}
    step = step_of(
        ev.LLMResponded(
            model="scripted/a",
            message={"content": "ok"},
            usage={},
            cost_usd=0.0,
            latency_ms=1.0,
            inputs=inputs,
            **HEADER,
        )
    )
    blocks = dict(step.blocks)
    assert blocks["system prompt tokens"] == "7990"
    assert blocks["trimmed from the prompt"] == "memories: m4, m5\nrecent_activity: 12"


def test_a_parked_run_names_what_it_waits_for() -> None:
    on_approval = step_of(ev.RunParked(approval_id="ap-1", call_id="c1", **HEADER))
    on_spawn = step_of(ev.RunParked(spawn_id="sp-1", call_id="c2", **HEADER))
    assert on_approval.title == "Parked: waiting for approval ap-1"
    assert on_spawn.title == "Parked: waiting for sub-agent spawn sp-1"


def test_a_resumed_run_names_who_answered_its_approval_and_their_note() -> None:
    resumed_at = ev.RunResumed(from_version=4, **HEADER)
    answered = HEADER["timestamp"]
    expired = resumed(resumed_at, "ap-1", ApprovalAnswer("ap-1", "expired", None, None, answered))
    denied = resumed(resumed_at, "ap-1", ApprovalAnswer("ap-1", "denied", "bob", "no", answered))
    unknown = resumed(resumed_at, "ap-1", None)
    assert denied.title == "Resumed: approval denied by bob"
    assert denied.facts == [("approval", "ap-1"), ("answered", "2026-11-27 07:00:00 UTC")]
    assert denied.blocks == [("note", "no")]
    assert (expired.title, expired.blocks) == ("Resumed: approval expired", [])
    assert unknown.title == "Resumed" and unknown.facts[0] == ("approval", "ap-1")


def test_a_message_delivery_says_how_many_attempts_and_what_failed() -> None:
    at = HEADER["timestamp"]
    delivered = delivery_of("m1", Outcome("delivered", 1, at, http_status=202))
    failed = delivery_of("m2", Outcome("failed", 3, at, error="HTTP 500 from http://x"))
    assert (delivered.status, delivered.detail) == ("delivered", "HTTP 202 after 1 attempt")
    assert failed.status == "failed"
    assert failed.detail.startswith("after 3 attempts: HTTP 500 from http://x; ")
    assert delivery_of("m3", None) == Delivery("m3", "pending", "not sent yet")


def test_an_approval_past_its_expiry_reads_expired() -> None:
    now = HEADER["timestamp"]
    assert expiry((now + timedelta(hours=23, minutes=59)).isoformat(), now) == "in 23 h"
    assert expiry((now - timedelta(seconds=1)).isoformat(), now) == "expired"
    assert expiry(now.isoformat(), now) == "expired"


def test_a_plan_update_shows_its_progress_and_items_and_an_erased_plan_says_so() -> None:
    items = [{"text": "read", "status": "done"}, {"text": "reply", "status": "pending"}]
    step = step_of(ev.PlanUpdated(items=items, call_id="c1", **HEADER))
    assert (step.kind, step.title, step.facts) == ("decision", "Plan updated", [("done", "1 of 2")])
    assert step.blocks == [("plan", "done        read\npending     reply")]
    erased = step_of(ev.PlanUpdated(items={"erased": True}, **HEADER))
    assert erased.facts == [("plan", "erased")] and erased.blocks == []
