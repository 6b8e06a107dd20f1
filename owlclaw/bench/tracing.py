"""``owlclaw bench tracing``: what exporting a run's spans over OTLP costs a tool step.

The runs of ``owlclaw bench runtime`` (a scripted model at zero latency, ``TOOL_STEPS``
log_decision calls a run, durable appends), with tracing off and exporting over OTLP/HTTP to a
loopback receiver in this process (configured by OTEL_EXPORTER_OTLP_ENDPOINT, as an operator
would), in alternating rounds. A step is the gap between one model call ending and the next one
starting, read from the recorded events; with export on it includes the ``execute_tool`` span
and the next ``chat`` span, and the batch exporter's thread runs beside it. The receiver keeps
the request bodies and counts their spans after the runs (an invoke_agent, a chat per model call
and an execute_tool per step: ``2 + 2 * TOOL_STEPS`` a run, warm-up runs included), so that every
span is shown to have arrived.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw import tracing
from owlclaw.bench import percentiles
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.agent_runtime import AgentRuntime

TOOL_STEPS = 10
SCRIPT = "bench-tracing"
ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ROUNDS = 3
"""Runs alternate between off and on in this many rounds, so that a change of the machine's
load falls on both."""


def _script() -> list[dict[str, Any]]:
    """Distinct calls: the runtime stops a run that repeats one."""
    steps = [{"tool_calls": [_decision(f"step {i}")]} for i in range(TOOL_STEPS)]
    return [*steps, {"content": "done"}]


def _decision(reasoning: str) -> dict[str, Any]:
    return {"name": "log_decision", "arguments": {"reasoning": reasoning, "decision_type": "other"}}


class _Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP endpoint that keeps what it is sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[bytes] = []

    def spans(self) -> int:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        count = 0
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            count += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        return count


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        self.server.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def _receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, name="otlp-bench", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def _exporting_to(url: str | None) -> Iterator[None]:
    """Tracing as the environment says with OTEL_EXPORTER_OTLP_ENDPOINT set to ``url`` (unset
    for None); as it was afterwards."""
    before = os.environ.get(ENDPOINT)
    os.environ.pop(ENDPOINT, None)
    if url is not None:
        os.environ[ENDPOINT] = url
    try:
        yield
    finally:
        tracing.flush()
        os.environ.pop(ENDPOINT, None)
        if before is not None:
            os.environ[ENDPOINT] = before
        tracing.enable()


def _step_ms(ledger: Ledger, run_ids: list[str]) -> list[float]:
    steps = []
    for run_id in run_ids:
        events = ledger.stream(uuid.UUID(run_id))
        responses = [e for e in events if isinstance(e, ev.LLMResponded)]
        for done, following in pairwise(responses):
            next_request = following.timestamp - timedelta(milliseconds=following.latency_ms)
            steps.append((next_request - done.timestamp).total_seconds() * 1000)
    return steps


def _runs(ledger: Ledger, runs: int) -> list[str]:
    """``runs`` runs of a new agent after one to warm up; their ids."""
    runtime = AgentRuntime(ledger, f"bench-{uuid.uuid4().hex[:6]}", models=[f"scripted/{SCRIPT}"])
    try:
        asyncio.run(runtime.run("webhook"))
        return [asyncio.run(runtime.run("webhook", focus="bench")).run_id for _ in range(runs)]
    finally:
        runtime.close()


def run(url: str, runs: int = 30) -> dict[str, Any]:
    register_script(SCRIPT, _script())
    rounds = min(ROUNDS, runs)
    off: list[float] = []
    on: list[float] = []
    with Ledger(url) as ledger, _receiver() as receiver:
        endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
        for i in range(rounds):
            share = runs // rounds + (i < runs % rounds)
            with _exporting_to(None):
                off += _step_ms(ledger, _runs(ledger, share))
            with _exporting_to(endpoint):
                on += _step_ms(ledger, _runs(ledger, share))
        received = receiver.spans()
    off_p, on_p = percentiles(off), percentiles(on)
    return {
        "runs": runs,
        "tool_steps_per_run": TOOL_STEPS,
        "rounds": rounds,
        "tool_step_tracing_off": off_p,
        "tool_step_otlp_export": on_p,
        "added_per_step_ms": {
            "p50": round(on_p["p50_ms"] - off_p["p50_ms"], 3),
            "p95": round(on_p["p95_ms"] - off_p["p95_ms"], 3),
        },
        "spans_received": received,
        "spans_expected": (runs + rounds) * (2 + 2 * TOOL_STEPS),
    }
