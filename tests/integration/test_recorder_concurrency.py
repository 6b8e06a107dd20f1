"""The OwlClaw recorder under concurrency: no gaps, no duplicates, no reordering for readers."""

from __future__ import annotations

import multiprocessing as mp
import threading
import uuid
from collections import defaultdict

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent

from events.recorder import OwlClawApplicationRecorder
from owlclaw.database import Database
from tests.integration.processes import append_batches

pytestmark = pytest.mark.integration


def test_a_reader_never_passes_a_transaction_that_took_a_lower_id(
    recorder: OwlClawApplicationRecorder, fresh_db: Database
) -> None:
    """The slow writer takes id 1 and stalls; the fast one commits id 2. Readers must wait."""
    slow = psycopg.connect(fresh_db.url)
    slow.execute(recorder.sql_append, ([uuid.uuid4()], [1], ["Slow"], [b"{}"]))
    [fast_id] = recorder.insert_events([StoredEvent(uuid.uuid4(), 1, "Fast", b"{}")]) or [0]
    assert fast_id == 2
    assert recorder.select_notifications(start=None, limit=10) == []
    assert recorder.max_notification_id() is None
    assert recorder.is_held_back(0)
    slow.commit()
    slow.close()
    assert [n.topic for n in recorder.select_notifications(start=None, limit=10)] == [
        "Slow",
        "Fast",
    ]
    assert recorder.max_notification_id() == 2


def test_a_rolled_back_append_leaves_a_gap_that_readers_pass(
    recorder: OwlClawApplicationRecorder, fresh_db: Database
) -> None:
    aborted = psycopg.connect(fresh_db.url)
    aborted.execute(recorder.sql_append, ([uuid.uuid4()], [1], ["Aborted"], [b"{}"]))
    recorder_thread_ids: list[int] = []
    worker = threading.Thread(
        target=lambda: recorder_thread_ids.extend(
            recorder.insert_events([StoredEvent(uuid.uuid4(), 1, "Kept", b"{}")]) or []
        )
    )
    worker.start()
    worker.join()
    aborted.rollback()
    aborted.close()
    notes = recorder.select_notifications(start=None, limit=10)
    assert [(n.id, n.topic) for n in notes] == [(2, "Kept")]


def test_many_writer_processes_one_follower_no_gaps_no_duplicates(
    recorder: OwlClawApplicationRecorder, fresh_db: Database
) -> None:
    writers, batches, batch = 6, 60, 3
    total = writers * batches * batch
    received: list[tuple[int, uuid.UUID, int, bytes]] = []

    def follow() -> None:
        with recorder.subscribe(gt=0) as subscription:
            for n in subscription:
                received.append((n.id, n.originator_id, n.originator_version, n.state))
                if len(received) == total:
                    return

    follower = threading.Thread(target=follow)
    follower.start()
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [
        ctx.Process(target=append_batches, args=(fresh_db.url, "events", w, batches, batch, start))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    follower.join(timeout=60)
    assert not follower.is_alive(), f"follower stalled after {len(received)} of {total}"

    ids = [r[0] for r in received]
    assert len(ids) == len(set(ids)) == total  # no duplicates, nothing missed
    assert ids == sorted(ids)  # delivered in log order
    per_stream: dict[uuid.UUID, list[int]] = defaultdict(list)
    for _, stream, version, _ in received:
        per_stream[stream].append(version)
    assert len(per_stream) == writers
    assert all(v == list(range(1, batches * batch + 1)) for v in per_stream.values())
    # Every committed row was delivered: the follower saw exactly what the table holds.
    everything = recorder.select_notifications(start=None, limit=total + 10)
    assert [n.id for n in everything] == ids
