"""`/metrics` of a real `owlclaw run` service (in this process, agents hosted locally): after a
few runs of a scripted agent (tool calls that succeed, fail, time out or are rejected), what
Prometheus scrapes over HTTP matches what the ledger holds."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.database import Database
from owlclaw.messages import Result
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.apps import make_app
from tests.served import local_service

pytestmark = pytest.mark.integration

HANDLERS = """
import asyncio

from owlclaw import Registry

registry = Registry()


@registry.capability("A quote for a symbol.")
def quote(symbol: str) -> dict[str, object]:
    if symbol == "FAIL":
        raise RuntimeError("market data unavailable")
    return {"symbol": symbol, "price": 101.5}


@registry.capability("A quote from the slow exchange.", timeout_s=0.05)
async def slow_quote(symbol: str) -> dict[str, object]:
    await asyncio.Event().wait()
    return {}
"""


def calls(*tool_calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in tool_calls]}


SCRIPT = {
    "cases": [
        {
            "when": "Focus: quotes",
            "steps": [
                calls(("quote", {"symbol": "AAPL"})),
                calls(("quote", {"symbol": "FAIL"}), ("quote", {"symbol": "MSFT"})),
                {"content": "quoted"},
            ],
        },
        {
            "when": "Focus: slow",
            "steps": [calls(("slow_quote", {"symbol": "AAPL"})), {"content": "too slow"}],
        },
        {
            "when": "Focus: invent",
            "steps": [calls(("quote", {"ticker": 7})), {"content": "rejected"}],
        },
        {"when": "Trigger", "steps": [{"content": "nothing to do"}]},
    ]
}
FOCUSES = ["quotes", "quotes", "slow", "invent", "idle"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scraped(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def counted_in(ledger: Ledger) -> list[ev.LedgerEvent]:
    events, after = [], 0
    while page := ledger.log.read(after):
        events += [logged.event for logged in page]
        after = page[-1].position
    return events


def serve_runs_and_scrape(fresh_db: Database, tmp_path: Path) -> tuple[Samples, int, int]:
    """Serve the agent, run ``FOCUSES`` through the webhook, wait for every run to end, then
    scrape ``/metrics`` without a token until its counters include the last committed log
    position; the samples, that position and the status of ``GET /status`` without a token."""
    root = make_app(
        tmp_path / "metered", config='[agent]\nid = "metered"\nmodels = ["scripted/metered"]\n'
    )
    (root / "handlers.py").write_text(HANDLERS)
    (root / "scripts").mkdir()
    (root / "scripts" / "metered.json").write_text(json.dumps(SCRIPT))
    config = local_service(fresh_db, tmp_path)
    service = Service(config, [load_app(root)])
    base = f"http://127.0.0.1:{config.server.port}"

    async def scenario() -> tuple[Samples, int, int]:
        async with serving(service, config), httpx.AsyncClient(trust_env=False) as http:
            auth = {"Authorization": "Bearer test-token"}
            runs = []
            for focus in FOCUSES:
                url = f"{base}/agents/metered/trigger"
                runs.append((await http.post(url, json={"focus": focus}, headers=auth)).json())
            for run in runs:
                await service.ask(Result(agent_id="metered", run_id=run["run_id"]))
            assert service.ledger is not None
            target = await asyncio.to_thread(service.ledger.log.last_committed)
            deadline = asyncio.get_running_loop().time() + 30
            while True:  # the counters follow the log: scrape until they include the target
                scrape = await http.get(f"{base}/metrics")  # no token: bound to loopback
                assert scrape.status_code == 200, scrape.text
                samples = scraped(scrape.text)
                position = int(sample(samples, "owlclaw_metrics_log_position"))
                if position >= target or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            unauthorized = (await http.get(f"{base}/status")).status_code
            return samples, position, unauthorized

    return asyncio.run(scenario())


def test_the_scraped_counters_match_the_events_in_the_ledger(
    fresh_db: Database, tmp_path: Path
) -> None:
    samples, position, unauthorized = serve_runs_and_scrape(fresh_db, tmp_path)

    assert unauthorized == 401  # the token is still needed everywhere else
    with Ledger(fresh_db.url) as ledger:
        assert position >= ledger.log.last_committed()
        events = counted_in(ledger)
    check_runs(samples, events)
    check_llm_calls(samples, events)
    check_tool_calls(samples, events)
    check_service_state(samples)


def check_runs(samples: Samples, events: list[ev.LedgerEvent]) -> None:
    started = Counter(e.trigger for e in events if isinstance(e, ev.RunStarted))
    assert started == {"webhook": len(FOCUSES)}
    assert sample(samples, "owlclaw_runs_started_total", trigger="webhook") == len(FOCUSES)
    ended = [e for e in events if isinstance(e, ev.RunCompleted)]
    assert len(ended) == len(FOCUSES)
    assert sample(samples, "owlclaw_runs_ended_total", status="completed") == len(FOCUSES)
    assert sample(samples, "owlclaw_runs_ended_total", status="failed") == 0
    assert sample(samples, "owlclaw_run_duration_seconds_count", status="completed") == len(ended)
    assert sample(samples, "owlclaw_run_duration_seconds_sum", status="completed") == pytest.approx(
        sum(e.duration_ms for e in ended) / 1000
    )


def check_llm_calls(samples: Samples, events: list[ev.LedgerEvent]) -> None:
    responses = [e for e in events if isinstance(e, ev.LLMResponded)]
    model = "scripted/metered"
    assert {e.model for e in responses} == {model}
    assert sample(samples, "owlclaw_llm_calls_total", model=model) == len(responses) == 11
    for kind, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
        expected = sum(e.usage[key] for e in responses)
        assert sample(samples, "owlclaw_llm_tokens_total", model=model, type=kind) == expected
    assert sample(samples, "owlclaw_llm_cost_usd_total", model=model) == pytest.approx(
        sum(e.cost_usd for e in responses)
    )


def check_tool_calls(samples: Samples, events: list[ev.LedgerEvent]) -> None:
    in_ledger = Counter(
        (e.tool, type(e).__name__, getattr(e, "error_code", None))
        for e in events
        if isinstance(
            e, ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut | ev.ToolCallRejected
        )
    )
    assert in_ledger == {
        ("quote", "ToolCallSucceeded", None): 4,
        ("quote", "ToolCallFailed", "TOOL_FAILED"): 2,
        ("slow_quote", "ToolCallTimedOut", None): 1,
        ("quote", "ToolCallRejected", None): 1,
    }
    tool_calls = "owlclaw_tool_calls_total"
    assert sample(samples, tool_calls, tool="quote", outcome="ok") == 4
    assert sample(samples, tool_calls, tool="quote", outcome="TOOL_FAILED") == 2
    assert sample(samples, tool_calls, tool="slow_quote", outcome="TIMEOUT") == 1
    assert sample(samples, tool_calls, tool="quote", outcome="REJECTED") == 1
    durations = "owlclaw_tool_call_duration_seconds_count"
    assert sample(samples, durations, tool="quote", outcome="ok") == 4
    assert sample(samples, durations, tool="slow_quote", outcome="TIMEOUT") == 1
    assert sample(samples, durations, tool="quote", outcome="REJECTED") == 0


def check_service_state(samples: Samples) -> None:
    projections = {dict(labels)["projection"] for name, labels in samples if "lag_events" in name}
    assert {"audit", "runs", "memory", "schedules"} <= projections
    workers = {dict(labels)["worker"] for name, labels in samples if "worker_restarts" in name}
    assert {"metrics", "projection:runs", "timer-worker"} <= workers
    assert sample(samples, "owlclaw_approvals_pending", agent="metered") == 0
    depth = ("owlclaw_mailbox_depth", frozenset({("agent", "metered")}))
    assert samples[depth] == 0  # every run ended: nothing waits
