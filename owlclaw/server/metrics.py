"""Prometheus metrics of ``owlclaw run``, served at ``GET /metrics``.

What agents did (runs, LLM calls, tool calls, timer fires) is counted from the ledger, not from
hooks in this process: agents may run in Ray actors, in other processes, and the ledger is where
every one of them records what it did. A supervised worker of the service follows the log from
its head at start-up, so the counters start at zero with each ``owlclaw run``, as Prometheus
counters do on a restart (``rate()`` and ``increase()`` account for the reset); the runs and
audit views hold the totals. What is a state rather than a count (projection lag, worker
restarts, mailbox depth, pending approvals) is read at scrape time through the code ``owlclaw
status``, ``owlclaw projections status`` and ``GET /approvals`` use.

Each service has its own registry (not prometheus-client's global one), so two services in one
process, or tests, never share a counter.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from events import Ledger
from events import catalog as ev
from owlclaw.reports.approvals import PendingApproval
from owlclaw.supervisor import WorkerStatus
from owlclaw.tools.errors import UNKNOWN_TOOL
from projections.feed import follow_log_until
from projections.status import ProjectionStatus

UNKNOWN_TOOL_LABEL = "(unknown)"

RUN_STATUS: dict[type[ev.LedgerEvent], str] = {
    ev.RunCompleted: "completed",
    ev.RunFailed: "failed",
    ev.RunTimedOut: "timed_out",
    ev.RunTerminated: "terminated",
    ev.RunSkipped: "skipped",
}
"""A run's end event -> its status, as the runs view names it."""

COUNTED: tuple[type[ev.LedgerEvent], ...] = (
    ev.RunStarted,
    *RUN_STATUS,
    ev.LLMResponded,
    *ev.CALL_SETTLING_EVENTS,
    ev.TimerFired,
)
"""The events the counters read (the worker asks the database for these only)."""

RUN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
TOOL_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


ToolRan = ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut
ToolRefused = ev.ToolCallDenied | ev.ToolCallRejected | ev.ToolOutcomeUnknown


def tool_outcome(event: ToolRan | ToolRefused) -> str:
    """``ok``, or the error code of a refused or failed call as ``owlclaw tools`` counts it
    (``REJECTED``, ``DENIED``, ``RATE_LIMITED``, ``APPROVAL_DENIED``, a failed call's own code,
    ``TIMEOUT``, ``OUTCOME_UNKNOWN``)."""
    match event:
        case ev.ToolCallSucceeded():
            return "ok"
        case ev.ToolCallFailed(error_code=code):
            return code
        case ev.ToolCallTimedOut():
            return "TIMEOUT"
        case ev.ToolCallDenied(error_code=code):
            return code or "DENIED"
        case ev.ToolCallRejected():
            return "REJECTED"
    return "OUTCOME_UNKNOWN"


def tool_label(event: ToolRefused) -> str:
    """The tool's name, but ``(unknown)`` for a call to a tool the run does not have: that name
    is whatever the model wrote, and each distinct label value is a series kept until restart."""
    if isinstance(event, ev.ToolCallRejected) and event.error.startswith(UNKNOWN_TOOL):
        return UNKNOWN_TOOL_LABEL
    return event.tool


class LedgerCounters:
    """The metrics counted from ledger events: ``observe`` is the event -> metric mapping."""

    def __init__(self, registry: CollectorRegistry):
        self.runs_started = Counter(
            "owlclaw_runs_started_total",
            "Runs started, by trigger.",
            ["trigger"],
            registry=registry,
        )
        self.runs_ended = Counter(
            "owlclaw_runs_ended_total",
            "Runs ended, by status (completed, failed, timed_out, terminated, skipped).",
            ["status"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "owlclaw_run_duration_seconds",
            "Duration of ended runs, by status.",
            ["status"],
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.llm_calls = Counter(
            "owlclaw_llm_calls_total",
            "LLM responses recorded, by the model that answered.",
            ["model"],
            registry=registry,
        )
        self.llm_tokens = Counter(
            "owlclaw_llm_tokens_total",
            "LLM tokens, by model and type (input: prompt, output: completion).",
            ["model", "type"],
            registry=registry,
        )
        self.llm_cost = Counter(
            "owlclaw_llm_cost_usd_total",
            "LLM cost in US dollars, by model (litellm's price of each response).",
            ["model"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "owlclaw_tool_calls_total",
            "Tool calls that ended, by tool and outcome (ok, or the error code).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.tool_duration = Histogram(
            "owlclaw_tool_call_duration_seconds",
            "Duration of the tool calls that ran (ok, failed, timed out), by tool and outcome.",
            ["tool", "outcome"],
            buckets=TOOL_BUCKETS,
            registry=registry,
        )
        self.timer_lateness = Histogram(
            "owlclaw_timer_fire_lateness_seconds",
            "How long after its due time a timer fire was recorded (TimerFired).",
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.position = Gauge(
            "owlclaw_metrics_log_position",
            "The ledger log position the counters include (they count from the head at start).",
            registry=registry,
        )

    def observe(self, event: ev.LedgerEvent) -> None:
        match event:
            case ev.RunStarted(trigger=trigger):
                self.runs_started.labels(trigger).inc()
            case ev.RunEnded(duration_ms=duration_ms):
                status = RUN_STATUS[type(event)]
                self.runs_ended.labels(status).inc()
                self.run_duration.labels(status).observe(duration_ms / 1000)
            case ev.LLMResponded(model=model, usage=usage, cost_usd=cost):
                self.llm_calls.labels(model).inc()
                self.llm_tokens.labels(model, "input").inc(usage.get("prompt_tokens", 0))
                self.llm_tokens.labels(model, "output").inc(usage.get("completion_tokens", 0))
                self.llm_cost.labels(model).inc(cost)
            case ev.ToolCallSucceeded() | ev.ToolCallFailed() | ev.ToolCallTimedOut():
                outcome = tool_outcome(event)
                self.tool_calls.labels(event.tool, outcome).inc()
                self.tool_duration.labels(event.tool, outcome).observe(event.duration_ms / 1000)
            case ev.ToolCallDenied() | ev.ToolCallRejected() | ev.ToolOutcomeUnknown():
                self.tool_calls.labels(tool_label(event), tool_outcome(event)).inc()
            case ev.TimerFired(fire_time=due, timestamp=fired):
                self.timer_lateness.observe(max(0.0, (fired - due).total_seconds()))


@dataclass(frozen=True)
class ServiceState:
    """What a scrape reads of the service at that moment."""

    projections: list[ProjectionStatus]
    workers: list[WorkerStatus]
    served: list[str]
    approvals: list[PendingApproval]
    mailboxes: dict[str, int] | None
    """Runs waiting in each active agent's mailbox; None when the hosts did not answer."""


class StateCollector:
    """The scrape-time gauges (and the supervisor's restart counters) of one ServiceState."""

    def __init__(self, state: ServiceState):
        self.state = state

    def collect(self) -> Iterable[Metric]:
        state = self.state
        lag_events = GaugeMetricFamily(
            "owlclaw_projection_lag_events",
            "Events of the log the projection has not applied yet.",
            labels=["projection"],
        )
        lag_seconds = GaugeMetricFamily(
            "owlclaw_projection_lag_seconds",
            "Age of the oldest event the projection has not applied yet.",
            labels=["projection"],
        )
        parked = GaugeMetricFamily(
            "owlclaw_projection_parked_events",
            "Events the projection could not apply and parked (owlclaw projections retry).",
            labels=["projection"],
        )
        for p in state.projections:
            lag_events.add_metric([p.name], p.lag_events)
            lag_seconds.add_metric([p.name], p.lag_seconds)
            parked.add_metric([p.name], p.parked_count)
        restarts = CounterMetricFamily(
            "owlclaw_worker_restarts",
            "Restarts of the service's supervised workers after a failure.",
            labels=["worker"],
        )
        for w in state.workers:
            restarts.add_metric([w.name], w.restarts)
        pending = GaugeMetricFamily(
            "owlclaw_approvals_pending",
            "Tool calls of served agents waiting for a person's approval.",
            labels=["agent"],
        )
        counts = Tally(a.agent_id for a in state.approvals)
        for agent_id in state.served:
            pending.add_metric([agent_id], counts[agent_id])
        yield from (lag_events, lag_seconds, parked, restarts, pending)
        if state.mailboxes is not None:
            depth = GaugeMetricFamily(
                "owlclaw_mailbox_depth",
                "Runs waiting in an active agent's mailbox on its host (not the running one).",
                labels=["agent"],
            )
            for agent_id, queued in state.mailboxes.items():
                depth.add_metric([agent_id], queued)
            yield depth


class Metrics:
    """One service's registry: the ledger-fed counters and, per scrape, its state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.counters = LedgerCounters(self.registry)
        self.position = 0
        """Where the counters are in the log; the service sets it to the head at start."""

    def follow(self, ledger: Ledger, stop: threading.Event) -> None:
        """Count the events after ``position`` until ``stop`` (a supervised worker: restarted
        after an outage, it resumes where it was, so no event is counted twice or missed)."""
        self.counters.position.set(self.position)
        for batch in follow_log_until(ledger, stop, self.position, COUNTED):
            for logged in batch.events:
                self.counters.observe(logged.event)
            self.position = batch.position
            self.counters.position.set(batch.position)

    def exposition(self, state: ServiceState) -> bytes:
        """The text format of the counters and ``state``."""
        scrape = CollectorRegistry()
        scrape.register(self.registry)
        scrape.register(StateCollector(state))
        return generate_latest(scrape)
