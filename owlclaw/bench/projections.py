"""``owlclaw bench projections``: view catch-up speed, recall latency, remember-to-recallable.

1. Catch-up: a ledger of N events of realistic runs (10 tool steps and one remembered lesson
   each) is projected from position 0 by every view, as after a rebuild or a long outage.
2. Recall: one agent holds 10,000 memories inside a store of 1,000,000 memories over 100
   agents. The bulk rows carry synthetic (random unit) vectors; the query embedding is real.
3. Remember-to-recallable: with a live memory projection, the time from a MemoryRemembered
   commit until recall (waiting for that log position) returns it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.run import Run
from owlclaw.bench import percentiles
from owlclaw.compose.memory import open_recall
from owlclaw.compose.read import configured_views
from owlclaw.config import OwlClawConfig
from projections import MemoryView, ProjectionRunner
from projections.memory import vector_literal
from projections.synthetic import fill_memories, nearest_ids

CONFIG = OwlClawConfig()
"""The default configuration's views; each view's rows only (no MEMORY.md files written)."""
TOOLS_PER_RUN = 10
LESSONS = [
    "After sharp market drop, rebound signals are usually accurate within 2 hours",
    "Low volume breakouts on Fridays tend to fail before the close",
    "Earnings weeks widen spreads; size positions down by half",
    "The broker API rate-limits at 10 requests per second",
]


def _record_run(ledger: Ledger, agent: Agent, n: int) -> None:
    run = Run.start(agent.agent_id, agent.queue_run("heartbeat", "check entry opportunities"))
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
    run.record(
        ev.MemoryRemembered,
        agent_id=agent.agent_id,
        memory_id=uuid.uuid4(),
        content=f"{LESSONS[n % len(LESSONS)]} (run {n})",
        tags=["trading", "lesson"],
    )
    run.record(ev.RunCompleted, iterations=TOOLS_PER_RUN, tool_calls=TOOLS_PER_RUN)
    ledger.append(agent, run)


def fill_ledger(ledger: Ledger, events: int, progress: Callable[[str], None]) -> int:
    agents = [ledger.register_agent(f"bench-{i}-{uuid.uuid4().hex[:6]}") for i in range(10)]
    n = 0
    while ledger.log.head() < events:
        _record_run(ledger, agents[n % len(agents)], n)
        n += 1
        if n % 500 == 0:
            progress(f"filling the ledger: {ledger.log.head():,} / {events:,} events")
    return ledger.log.head()


def measure_catch_up(
    ledger: Ledger, events: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    head = fill_ledger(ledger, events, progress)
    results: dict[str, Any] = {}
    for configured in configured_views(CONFIG, memory_files=False):
        name = configured.name
        progress(f"catching up the {name} view over {head:,} events")
        view = configured.open(ledger)
        applied = ledger.database.count_events(view.events)
        if isinstance(view, MemoryView):
            view.embedder.embed(["load the model before timing"])
        started = time.perf_counter()
        ProjectionRunner(ledger, view).catch_up()
        elapsed = time.perf_counter() - started
        results[name] = {
            "log_events": head,
            "events_applied": applied,
            "seconds": round(elapsed, 2),
            "log_events_per_second": round(head / elapsed),
        }
    return results


def measure_recall(
    ledger: Ledger, memories: int, agents: int, per_agent: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    store = open_recall(ledger, CONFIG, files=False)
    view = store.view
    target = "bench-recall-target"
    progress(f"bulk-loading {memories:,} memories over {agents} agents (synthetic vectors)")
    fill_memories(view, target, memories, agents, per_agent)
    queries = [f"{lesson} — what did we learn?" for lesson in LESSONS] * 10
    embed_ms, index_ms, total_ms = [], [], []
    store.recall(target, "warm up")
    for query in queries:
        t0 = time.perf_counter()
        vector = vector_literal(view.embedder.embed([query])[0])
        t1 = time.perf_counter()
        rows = nearest_ids(view, target, vector, 20)
        t2 = time.perf_counter()
        assert len(rows) == 20
        result = store.recall(target, query, limit=5)
        t3 = time.perf_counter()
        assert len(result.memories) == 5
        embed_ms.append((t1 - t0) * 1000)
        index_ms.append((t2 - t1) * 1000)
        total_ms.append((t3 - t2) * 1000)
    return {
        "store_memories": memories,
        "agents": agents,
        "agent_memories": per_agent,
        "vectors": "synthetic random unit vectors for bulk rows; real query embeddings",
        "query_embedding": percentiles(embed_ms),
        "index_query": percentiles(index_ms),
        "recall_including_embedding": percentiles(total_ms),
    }


def measure_remember_to_recallable(ledger: Ledger, samples: int) -> dict[str, Any]:
    store = open_recall(ledger, CONFIG, files=False)
    runner = ProjectionRunner(ledger, store.view)
    runner.catch_up()
    runner.start()
    agent = ledger.register_agent(f"bench-fresh-{uuid.uuid4().hex[:6]}")
    visible_ms, recall_ms = [], []
    try:
        for i in range(samples):
            content = f"Lesson {i}: {LESSONS[i % len(LESSONS)]}"
            run = Run.start(agent.agent_id, agent.queue_run("webhook"))
            run.record(
                ev.MemoryRemembered,
                agent_id=agent.agent_id,
                memory_id=uuid.uuid4(),
                content=content,
                tags=["bench"],
            )
            position = ledger.append(agent, run)[-1]
            committed = time.perf_counter()
            assert store.wait_for(position, timeout=10)
            absorbed = time.perf_counter()
            result = store.recall(agent.agent_id, content, limit=1)
            recalled = time.perf_counter()
            assert result.memories and result.memories[0].content == content
            visible_ms.append((absorbed - committed) * 1000)
            recall_ms.append((recalled - committed) * 1000)
            time.sleep(0.02)
    finally:
        runner.stop()
    return {
        "commit_to_view_absorbed": percentiles(visible_ms),
        "commit_to_recall_returned": percentiles(recall_ms),
    }


def run(
    url: str,
    events: int = 100_000,
    memories: int = 1_000_000,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    with Ledger(url) as ledger:
        catch_up = measure_catch_up(ledger, events, progress)
        progress("remember-to-recallable")
        freshness = measure_remember_to_recallable(ledger, samples=60)
        recall = measure_recall(ledger, memories, agents=100, per_agent=10_000, progress=progress)
    return {
        "catch_up": catch_up,
        "recall": recall,
        "remember_to_recallable": freshness,
        "targets": {
            "audit_catch_up_events_per_second_min": 10_000,
            "recall_index_query_p95_ms_max": 20,
            "recall_including_embedding_p95_ms_max": 40,
            "remember_to_recallable_p95_ms_max": 100,
        },
    }
