"""``owlclaw bench ledger``: OwlClaw recorder vs the stock eventsourcing recorder, and rehydration.

All figures come from one run on one database: writer *processes* append one event (or a batch of
ten) per commit to their own streams, for each recorder, and an agent with 100,000 events is
loaded back (snapshot + tail, and for contrast the whole stream).
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from events import catalog as ev
from events.aggregates import agent_stream_id, now
from events.codec import MsgspecMapper
from events.ledger import Ledger
from events.recorder import OwlClawApplicationRecorder, datastore_from_url

RECORDERS: dict[str, type[PostgresApplicationRecorder]] = {
    "owlclaw": OwlClawApplicationRecorder,
    "stock": PostgresApplicationRecorder,
}


def _sample_state() -> bytes:
    """A realistic payload: a tool result of a few hundred bytes, encoded like the ledger does."""
    event = ev.ToolCallSucceeded(
        originator_id=uuid.uuid4(),
        originator_version=1,
        timestamp=now(),
        call_id="call_0001",
        tool="query_state",
        result={
            "state": "market_state",
            "value": {"trend": "down", "drop_pct": 4.2},
            "cached": False,
        },
        duration_ms=1.3,
    )
    return MsgspecMapper().to_stored_event(event).state


def _make_recorder(kind: str, url: str, table: str, *, create: bool) -> PostgresApplicationRecorder:
    datastore = datastore_from_url(url, pool_size=1, max_overflow=0)
    recorder = RECORDERS[kind](datastore, events_table_name=table)
    if create:
        recorder.create_table()
    else:
        datastore.register_type_adapters()
    return recorder


def _writer(
    kind: str, url: str, table: str, commits: int, batch: int, start: Any, out: Any
) -> None:
    recorder = _make_recorder(kind, url, table, create=False)
    state = _sample_state()
    stream = uuid.uuid4()
    version = 0
    start.wait()
    began = time.perf_counter()
    for _ in range(commits):
        events = []
        for _ in range(batch):
            version += 1
            events.append(StoredEvent(stream, version, "ToolCallSucceeded", state))
        recorder.insert_events(events)
    out.put((began, time.perf_counter()))
    if isinstance(recorder, OwlClawApplicationRecorder):
        recorder.close_notifier()
    recorder.datastore.close()


def measure_writers(kind: str, url: str, writers: int, batch: int, events_per_writer: int) -> float:
    """Events per second with ``writers`` processes appending ``batch`` events per commit."""
    table = f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    _make_recorder(kind, url, table, create=True).datastore.close()
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    commits = max(1, events_per_writer // batch)
    procs = [
        ctx.Process(target=_writer, args=(kind, url, table, commits, batch, start, out))
        for _ in range(writers)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0 + 0.3 * writers)  # let every process connect and create its recorder
    start.set()
    spans: list[tuple[float, float]] = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    elapsed = max(end for _, end in spans) - min(began for began, _ in spans)
    return writers * commits * batch / elapsed


def measure_rehydration(url: str, events: int, snapshot_interval: int) -> dict[str, float]:
    """Build an agent with ``events`` events, then time loading it (median of 5)."""
    agent_id = f"bench-{uuid.uuid4().hex[:8]}"
    with Ledger(url, snapshot_interval=snapshot_interval) as ledger:
        agent = ledger.register_agent(agent_id)
        while agent.version < events:
            for _ in range(min(1000, events - agent.version)):
                agent.record(ev.IdentityLoaded, soul_sha256="s" * 64, identity_sha256="i" * 64)
            ledger.append(agent)

        def timed(fn: Callable[[], Any]) -> float:
            samples = []
            for _ in range(5):
                t = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t) * 1000)
            return statistics.median(samples)

        loaded = ledger.load_agent(agent_id)
        assert loaded.version == agent.version, (loaded.version, agent.version)
        with_snapshot = timed(lambda: ledger.load_agent(agent_id))
        full = timed(lambda: ledger.stream(agent_stream_id(agent_id)))
    return {
        "events": float(agent.version),
        "snapshot_interval": float(snapshot_interval),
        "load_ms": round(with_snapshot, 2),
        "read_all_events_ms": round(full, 2),
    }


def run(
    url: str,
    events_per_writer: int = 2000,
    rehydrate_events: int = 100_000,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    rates: dict[str, dict[str, float]] = {}
    for kind in RECORDERS:
        for writers, batch in ((1, 1), (8, 1), (8, 10)):
            label = f"{writers}w_batch{batch}"
            progress(f"{kind} recorder, {writers} writer process(es), {batch} event(s)/commit")
            per_writer = events_per_writer if writers == 1 else max(events_per_writer // 2, batch)
            if batch > 1:
                per_writer *= 5
            rates.setdefault(kind, {})[label] = round(
                measure_writers(kind, url, writers, batch, per_writer)
            )
    progress(f"rehydrating an agent with {rehydrate_events:,} events")
    rehydration = measure_rehydration(url, rehydrate_events, snapshot_interval=100)
    ours, stock = rates["owlclaw"], rates["stock"]
    return {
        "events_per_second": rates,
        "ratio_owlclaw_over_stock": {
            "1_writer": round(ours["1w_batch1"] / stock["1w_batch1"], 2),
            "8_writers": round(ours["8w_batch1"] / stock["8w_batch1"], 2),
            "8_writers_batch10": round(ours["8w_batch10"] / stock["8w_batch10"], 2),
        },
        "rehydration": rehydration,
        "targets": {"ratio_8_writers_min": 3.0, "rehydration_100k_ms_max": 200.0},
    }
