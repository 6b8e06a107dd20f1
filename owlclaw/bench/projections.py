"""``owlclaw bench projections``: how fast the views catch up with a ledger of N events.

The ledger is filled with realistic runs (10 tool calls each: LLM response, request, result),
then each view is built from position 0 in batches, as after a rebuild or a long outage.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from events import Ledger
from events import catalog as ev
from events.codec import topic_of
from projections import VIEWS
from projections.runner import ProjectionRunner

TOOLS_PER_RUN = 10


def fill_ledger(ledger: Ledger, events: int, progress: Callable[[str], None]) -> int:
    agents = [ledger.register_agent(f"bench-{i}-{uuid.uuid4().hex[:6]}") for i in range(10)]
    n = 0
    while ledger.head() < events:
        agent = agents[n % len(agents)]
        run = ledger.queue_run(agent, trigger="heartbeat", focus="check entry opportunities")
        for k in range(TOOLS_PER_RUN):
            run.record(
                ev.LLMResponded,
                model="scripted/bench",
                message={"tool_calls": k},
                usage={"total_tokens": 120},
                cost_usd=0.0004,
            )
            run.record(
                ev.ToolCallRequested,
                call_id=f"c{k}",
                tool="query_state",
                arguments={"state_name": "market_state"},
            )
            run.record(
                ev.ToolCallSucceeded,
                call_id=f"c{k}",
                tool="query_state",
                result={"trend": "down", "drop_pct": 4.2},
                duration_ms=0.8,
            )
        run.record(ev.RunCompleted, iterations=TOOLS_PER_RUN, tool_calls=TOOLS_PER_RUN)
        ledger.append(agent, run)
        n += 1
        if n % 500 == 0:
            progress(f"filling the ledger: {ledger.head():,} / {events:,} events")
    return ledger.head()


def _count(ledger: Ledger, topics: list[str]) -> int:
    with ledger.recorder.datastore.get_connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM ledger_events WHERE topic = ANY(%s)", (topics,)
        ).fetchone()
    return int(row["n"]) if row else 0


def run(
    url: str, events: int = 100_000, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    with Ledger(url) as ledger:
        head = fill_ledger(ledger, events, progress)
        catch_up: dict[str, Any] = {}
        for name, view_class in VIEWS.items():
            progress(f"catching up the {name} view over {head:,} events")
            view = view_class(ledger.recorder.datastore)
            view.create_table()
            relevant = _count(ledger, [topic_of(t) for t in view.events])
            started = time.perf_counter()
            ProjectionRunner(ledger, view).catch_up()
            elapsed = time.perf_counter() - started
            catch_up[name] = {
                "log_events": head,
                "events_applied": relevant,
                "seconds": round(elapsed, 2),
                "log_events_per_second": round(head / elapsed),
            }
    return {"catch_up": catch_up, "targets": {"audit_catch_up_events_per_second_min": 10_000}}
