"""The Prometheus metrics: which ledger event moves which metric, the scrape-time gauges, and who
may read ``/metrics`` without the token."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from events import catalog as ev
from owlclaw.config import OwlClawConfig, ServerConfig
from owlclaw.reports.approvals import PendingApproval
from owlclaw.server.metrics import Metrics, ServiceState
from owlclaw.server.service import Service
from owlclaw.server.webhook import make_app
from owlclaw.supervisor import WorkerStatus
from owlclaw.tools.errors import unknown_tool
from projections.status import ProjectionStatus

AT = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)


def event(kind: type[ev.LedgerEvent], at: datetime = AT, **fields: Any) -> ev.LedgerEvent:
    return kind(originator_id=uuid.uuid4(), originator_version=1, timestamp=at, **fields)


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_runs_are_counted_by_trigger_and_by_end_status_with_their_duration() -> None:
    metrics = Metrics()
    for trigger in ("webhook", "webhook", "timer"):
        metrics.counters.observe(event(ev.RunStarted, agent_id="a", run_no=1, trigger=trigger))
    metrics.counters.observe(event(ev.RunCompleted, duration_ms=1500.0))
    metrics.counters.observe(event(ev.RunFailed, error="boom", duration_ms=250.0))
    metrics.counters.observe(event(ev.RunSkipped, reason="idle"))

    assert value(metrics, "owlclaw_runs_started_total", trigger="webhook") == 2
    assert value(metrics, "owlclaw_runs_started_total", trigger="timer") == 1
    for status in ("completed", "failed", "skipped"):
        assert value(metrics, "owlclaw_runs_ended_total", status=status) == 1
    assert value(metrics, "owlclaw_run_duration_seconds_sum", status="completed") == 1.5
    assert value(metrics, "owlclaw_run_duration_seconds_bucket", status="failed", le="0.5") == 1
    assert value(metrics, "owlclaw_run_duration_seconds_bucket", status="failed", le="0.1") == 0


def test_llm_responses_count_calls_input_and_output_tokens_and_cost_by_model() -> None:
    metrics = Metrics()
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    for model, cost in (("openai/gpt-4o-mini", 0.25), ("openai/gpt-4o-mini", 0.5), ("x/y", 0.0)):
        metrics.counters.observe(
            event(ev.LLMResponded, model=model, message={}, usage=usage, cost_usd=cost)
        )

    assert value(metrics, "owlclaw_llm_calls_total", model="openai/gpt-4o-mini") == 2
    assert value(metrics, "owlclaw_llm_calls_total", model="x/y") == 1
    tokens = "owlclaw_llm_tokens_total"
    assert value(metrics, tokens, model="openai/gpt-4o-mini", type="input") == 200
    assert value(metrics, tokens, model="openai/gpt-4o-mini", type="output") == 40
    assert value(metrics, "owlclaw_llm_cost_usd_total", model="openai/gpt-4o-mini") == 0.75


@pytest.mark.parametrize(
    ("kind", "fields", "outcome", "ran"),
    [
        (ev.ToolCallSucceeded, {"result": 1, "duration_ms": 20.0}, "ok", True),
        (
            ev.ToolCallFailed,
            {"error": "x", "error_code": "TOOL_FAILED", "duration_ms": 20.0},
            "TOOL_FAILED",
            True,
        ),
        (ev.ToolCallTimedOut, {"timeout_s": 1.0, "duration_ms": 20.0}, "TIMEOUT", True),
        (ev.ToolCallDenied, {"reason": "denied"}, "DENIED", False),
        (ev.ToolCallDenied, {"reason": "x", "error_code": "RATE_LIMITED"}, "RATE_LIMITED", False),
        (ev.ToolCallRejected, {"error": "bad arguments"}, "REJECTED", False),
        (ev.ToolOutcomeUnknown, {"reason": "crashed"}, "OUTCOME_UNKNOWN", False),
    ],
)
def test_each_end_of_a_tool_call_counts_once_by_tool_and_outcome(
    kind: type[ev.LedgerEvent], fields: dict[str, Any], outcome: str, ran: bool
) -> None:
    metrics = Metrics()
    metrics.counters.observe(event(kind, call_id="c1", tool="quote", **fields))
    metrics.counters.observe(event(ev.ToolCallRequested, call_id="c2", tool="quote", arguments={}))

    assert value(metrics, "owlclaw_tool_calls_total", tool="quote", outcome=outcome) == 1
    samples = [
        s
        for family in metrics.registry.collect()
        if family.name == "owlclaw_tool_calls"
        for s in family.samples
        if s.name == "owlclaw_tool_calls_total"
    ]
    assert len(samples) == 1  # the request counted nothing
    duration = value(
        metrics, "owlclaw_tool_call_duration_seconds_sum", tool="quote", outcome=outcome
    )
    assert duration == (0.02 if ran else None)  # only a call that ran has a duration


def test_calls_of_tools_the_run_does_not_have_share_one_label() -> None:
    """The model names them: one series per invented name would grow without bound."""
    metrics = Metrics()
    for name in ("made_up", "also_made_up"):
        error = unknown_tool(name, ["quote"]).error
        metrics.counters.observe(event(ev.ToolCallRejected, call_id=name, tool=name, error=error))
    metrics.counters.observe(event(ev.ToolCallRejected, call_id="c", tool="quote", error="bad"))

    calls = "owlclaw_tool_calls_total"
    assert value(metrics, calls, tool="(unknown)", outcome="REJECTED") == 2
    assert value(metrics, calls, tool="quote", outcome="REJECTED") == 1
    assert value(metrics, calls, tool="made_up", outcome="REJECTED") is None


def test_a_timer_fire_observes_how_late_it_was_recorded_after_its_due_time() -> None:
    metrics = Metrics()
    due = AT - timedelta(seconds=3)
    metrics.counters.observe(event(ev.TimerFired, schedule_id="s", fire_time=due))
    metrics.counters.observe(event(ev.TimerFired, schedule_id="s", fire_time=AT + timedelta(1)))

    assert value(metrics, "owlclaw_timer_fire_lateness_seconds_count") == 2
    assert value(metrics, "owlclaw_timer_fire_lateness_seconds_sum") == 3.0  # early counts 0
    assert value(metrics, "owlclaw_timer_fire_lateness_seconds_bucket", le="2.5") == 1


def state(mailboxes: dict[str, int] | None) -> ServiceState:
    lagging = ProjectionStatus("memory", 10, 14, 4, 2.5, False, None, 1, ())
    approval = PendingApproval("ap1", "a", "r", "send", {}, "ask", [], "t0", "t1")
    return ServiceState(
        projections=[lagging],
        workers=[WorkerStatus("projection:memory", restarts=3), WorkerStatus("metrics")],
        served=["a", "b"],
        approvals=[approval],
        mailboxes=mailboxes,
    )


def scraped(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_a_scrape_reads_lag_restarts_approvals_and_mailboxes_from_the_service_state() -> None:
    samples = scraped(Metrics().exposition(state({"a": 2})))

    memory = (("projection", "memory"),)
    assert samples["owlclaw_projection_lag_events", memory] == 4
    assert samples["owlclaw_projection_lag_seconds", memory] == 2.5
    assert samples["owlclaw_projection_parked_events", memory] == 1
    assert samples["owlclaw_worker_restarts_total", (("worker", "projection:memory"),)] == 3
    assert samples["owlclaw_worker_restarts_total", (("worker", "metrics"),)] == 0
    assert samples["owlclaw_approvals_pending", (("agent", "a"),)] == 1
    assert samples["owlclaw_approvals_pending", (("agent", "b"),)] == 0
    assert samples["owlclaw_mailbox_depth", (("agent", "a"),)] == 2
    assert samples["owlclaw_metrics_log_position", ()] == 0


def test_a_host_that_cannot_say_its_mailboxes_leaves_only_that_gauge_out() -> None:
    names = {name for name, _ in scraped(Metrics().exposition(state(None)))}

    assert "owlclaw_mailbox_depth" not in names
    assert "owlclaw_approvals_pending" in names


def test_two_services_keep_their_own_counters() -> None:
    first, second = Metrics(), Metrics()
    first.counters.observe(event(ev.RunStarted, agent_id="a", run_no=1, trigger="webhook"))

    assert value(first, "owlclaw_runs_started_total", trigger="webhook") == 1
    assert value(second, "owlclaw_runs_started_total", trigger="webhook") is None


@pytest.mark.parametrize(
    ("host", "required", "needed"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("0.0.0.0", None, True),
        ("10.1.2.3", None, True),
        ("owlclaw.internal", None, True),
        ("127.0.0.1", True, True),
        ("0.0.0.0", False, False),
    ],
)
def test_metrics_need_the_token_off_loopback_unless_configured(
    host: str, required: bool | None, needed: bool
) -> None:
    server = ServerConfig(host=host, metrics_token_required=required)
    assert server.metrics_need_token is needed


@pytest.mark.parametrize(("required", "without_token"), [(None, 503), (True, 401)])
def test_the_guard_lets_metrics_through_without_the_token_only_when_not_required(
    required: bool | None, without_token: int
) -> None:
    """A service that has not started answers 503 ``starting`` to a request past the token
    check, 401 to one stopped by it."""
    config = OwlClawConfig(server=ServerConfig(metrics_token_required=required))

    async def scrape() -> tuple[int, int, int]:
        app = make_app(Service(config, []), "secret")
        async with TestClient(TestServer(app)) as client:
            bare = await client.get("/metrics")
            with_token = await client.get("/metrics", headers={"Authorization": "Bearer secret"})
            status = await client.get("/status")
            return bare.status, with_token.status, status.status

    assert asyncio.run(scrape()) == (without_token, 503, 401)
