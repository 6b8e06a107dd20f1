"""``owlclaw bench ledger``: OwlClaw recorder vs the stock eventsourcing recorder, and rehydration.

All figures come from one run on one database: writer *processes* append one event (or a batch of
ten) per append to their own streams, for each recorder, and an agent with 100,000 events is
loaded back (snapshot + tail, and for contrast the whole stream). In the ``8agents`` scenario each
process hosts eight agents (threads), as an agent host does: OwlClaw's group commit puts the
appends they have ready at the same moment into one transaction.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from events import catalog as ev
from events.codec import MsgspecMapper
from events.keys import InMemoryKeyStore
from events.ledger import Ledger
from events.postgres import datastore_from_url
from events.recorder import OwlClawApplicationRecorder
from events.redaction import Redactor
from events.sealing import Sealer
from events.streams import agent_stream_id, now

RECORDERS: dict[str, type[PostgresApplicationRecorder]] = {
    "owlclaw": OwlClawApplicationRecorder,
    "stock": PostgresApplicationRecorder,
}


def _sample_event() -> ev.ToolCallSucceeded:
    """A realistic payload: a tool result of a few hundred bytes."""
    return ev.ToolCallSucceeded(
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


def _mapper(encrypt: bool) -> MsgspecMapper:
    """The mapper the ledger encodes with: sealing content under a data key, or not."""
    return MsgspecMapper(Sealer(InMemoryKeyStore(), encrypt=encrypt))


def _secrets(count: int) -> dict[str, str]:
    """``count`` secrets as an app's would be known (name -> a random 32-character value)."""
    return {f"BENCH_{i}_API_KEY": f"sk-{uuid.uuid4().hex[:29]}" for i in range(count)}


def measure_redacted_encoding(encrypt: bool, secrets: int) -> dict[str, float]:
    """Microseconds to encode the sample event with ``secrets`` secrets known to the ledger's
    redactor: as it is (holding none of them, the usual event) and holding one of them."""
    known = _secrets(secrets)
    mapper = _mapper(encrypt)
    mapper.redactor = Redactor(known)
    event = _sample_event()
    holding = msgspec.structs.replace(
        event, result={**event.result, "token": next(iter(known.values()))}
    )
    return {
        "secrets_known": float(secrets),
        "us_per_event_holding_none": measure_encoding(encrypt, mapper=mapper, event=event),
        "us_per_event_holding_one": measure_encoding(encrypt, mapper=mapper, event=holding),
    }


def measure_encoding(
    encrypt: bool,
    samples: int = 20_000,
    mapper: MsgspecMapper | None = None,
    event: ev.ToolCallSucceeded | None = None,
) -> float:
    """Microseconds to encode (and seal) the sample event, median of 5 batches."""
    mapper, event = mapper or _mapper(encrypt), event or _sample_event()
    mapper.to_stored_event(event)  # makes the key
    batches = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(samples // 5):
            mapper.to_stored_event(event)
        batches.append((time.perf_counter() - began) / (samples // 5) * 1e6)
    return round(statistics.median(batches), 2)


@contextmanager
def _recorder(
    kind: str, url: str, table: str, *, create: bool, connections: int = 1
) -> Iterator[PostgresApplicationRecorder]:
    """A bare recorder of ``kind`` on a pool of its own, closed on exit."""
    datastore = datastore_from_url(url, pool_size=connections, max_overflow=0)
    try:
        recorder = RECORDERS[kind](datastore, events_table_name=table)
        if create:
            recorder.create_table()
        else:
            datastore.register_type_adapters()
        yield recorder
    finally:
        datastore.close()


WARMUP_COMMITS = 20
"""Appends each agent makes before the timed window: a new connection plans the append function
and its statements on first use (tens of ms per connection, 64 connections in ``8agents``), which
is start-up cost, not throughput."""


def _append_stream(
    recorder: PostgresApplicationRecorder,
    state: bytes,
    commits: int,
    batch: int,
    warmed: threading.Barrier,
    go: threading.Event,
) -> None:
    """One agent's writer: warm up, wait for the start, then append ``commits`` times ``batch``
    events to its own new stream."""
    stream = uuid.uuid4()
    version = 0
    try:
        for commit in range(WARMUP_COMMITS + commits):
            if commit == WARMUP_COMMITS:
                warmed.wait()
                go.wait()
            events = []
            for _ in range(batch):
                version += 1
                events.append(StoredEvent(stream, version, "ToolCallSucceeded", state))
            recorder.insert_events(events)
    except BaseException:
        warmed.abort()  # the process fails instead of waiting for this thread forever
        raise


def _writer(
    kind: str,
    url: str,
    table: str,
    agents: int,
    commits: int,
    batch: int,
    state: bytes,
    start: Any,
    out: Any,
) -> None:
    """One writer process: ``agents`` threads, each appending ``state`` to its own stream. It
    reports ``None`` once every thread is warm, then its timed span."""
    with _recorder(kind, url, table, create=False, connections=agents) as recorder:
        warmed = threading.Barrier(agents + 1)
        go = threading.Event()
        threads = [
            threading.Thread(
                target=_append_stream, args=(recorder, state, commits, batch, warmed, go)
            )
            for _ in range(agents)
        ]
        for t in threads:
            t.start()
        warmed.wait()
        out.put(None)
        start.wait()
        began = time.perf_counter()
        go.set()
        for t in threads:
            t.join()
        out.put((began, time.perf_counter()))
        if isinstance(recorder, OwlClawApplicationRecorder):
            recorder.close_notifier()


def _writers_context() -> Any:
    """Writers forked from a server process that imported this module once: each spawned
    writer imported eventsourcing and psycopg again (~0.5 s of CPU, 50 of them per run)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


def measure_writers(
    kind: str,
    url: str,
    writers: int,
    batch: int,
    events_per_writer: int,
    agents: int = 1,
    encrypt: bool = True,
) -> float:
    """Events per second with ``writers`` processes of ``agents`` threads each, every thread
    appending ``batch`` events per call to its own stream (``events_per_writer`` per process),
    timed from the moment all of them are warm."""
    table = f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    with _recorder(kind, url, table, create=True):
        pass
    ctx = _writers_context()
    start = ctx.Event()
    out = ctx.Queue()
    commits = max(1, events_per_writer // (batch * agents))
    state = _mapper(encrypt).to_stored_event(_sample_event()).state
    procs = [
        ctx.Process(
            target=_writer, args=(kind, url, table, agents, commits, batch, state, start, out)
        )
        for _ in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        if _receive(out, procs) is not None:
            raise RuntimeError("a writer reported its span before it was warm")
    start.set()
    spans: list[tuple[float, float]] = [_receive(out, procs) for _ in procs]
    for p in procs:
        p.join()
    elapsed = max(end for _, end in spans) - min(began for began, _ in spans)
    return writers * agents * commits * batch / elapsed


def _receive(out: Any, procs: list[Any]) -> Any:
    """The next report of a writer, or an error as soon as a writer has failed."""
    while True:
        try:
            return out.get(timeout=1.0)
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a writer process failed (exit codes {failed})") from None


def measure_rehydration(
    url: str, events: int, snapshot_interval: int, encrypt: bool = True
) -> dict[str, float]:
    """Build an agent with ``events`` events, then time loading it (median of 5)."""
    agent_id = f"bench-{uuid.uuid4().hex[:8]}"
    with Ledger(url, snapshot_interval=snapshot_interval, encrypt=encrypt) as ledger:
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


SCENARIOS = (
    ("1w_batch1", 1, 1, 1),
    ("8w_batch1", 8, 1, 1),
    ("8w_batch10", 8, 1, 10),
    ("8w_8agents_batch1", 8, 8, 1),
)
"""label, writer processes, agents (threads, one stream each) per process, events per append"""


def run(
    url: str,
    events_per_writer: int = 2000,
    rehydrate_events: int = 100_000,
    progress: Callable[[str], None] = lambda _: None,
    encrypt: bool = True,
    secrets: int = 3,
) -> dict[str, Any]:
    rates: dict[str, dict[str, float]] = {}
    for kind in RECORDERS:
        for label, writers, agents, batch in SCENARIOS:
            progress(
                f"{kind} recorder, {writers} writer process(es) x {agents} agent(s), "
                f"{batch} event(s)/append"
            )
            per_writer = events_per_writer * (5 if batch > 1 else 1)
            rates.setdefault(kind, {})[label] = round(
                measure_writers(kind, url, writers, batch, per_writer, agents, encrypt)
            )
    progress(f"rehydrating an agent with {rehydrate_events:,} events")
    rehydration = measure_rehydration(url, rehydrate_events, 100, encrypt)
    ours, stock = rates["owlclaw"], rates["stock"]
    return {
        "method": (
            "writer processes (spawned) append to their own streams on one database, first "
            "the owlclaw recorder then the stock eventsourcing recorder; each agent is a "
            "thread appending to its own stream, one append waiting for the previous, timed "
            f"after {WARMUP_COMMITS} warm-up appends on each connection; "
            "owlclaw groups the appends a process has ready at the same moment into one "
            "transaction (group commit), stock commits each under its table lock"
        ),
        "encrypt": encrypt,
        "encode_us_per_event": measure_encoding(encrypt),
        "encode_with_secrets": measure_redacted_encoding(encrypt, secrets) if secrets else None,
        "events_per_second": rates,
        "ratio_owlclaw_over_stock": {
            "1_writer": round(ours["1w_batch1"] / stock["1w_batch1"], 2),
            "8_writers": round(ours["8w_batch1"] / stock["8w_batch1"], 2),
            "8_writers_batch10": round(ours["8w_batch10"] / stock["8w_batch10"], 2),
            "8_writers_8_agents_each": round(
                ours["8w_8agents_batch1"] / stock["8w_8agents_batch1"], 2
            ),
        },
        "rehydration": rehydration,
        "targets": {"ratio_8_writers_min": 5.0, "rehydration_100k_ms_max": 200.0},
    }
