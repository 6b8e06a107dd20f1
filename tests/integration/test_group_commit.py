"""Group commit on PostgreSQL: appends ready together share a transaction, and each keeps its
own version checks, chains and acknowledgement."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import defaultdict

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.append_sql import ADVISORY_LOCK_KEY
from events.recorder import OwlClawApplicationRecorder
from events.streams import agent_stream_id
from owlclaw.database import Database
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def event(stream: uuid.UUID, version: int) -> StoredEvent:
    return StoredEvent(stream, version, "Test", f"{stream}:{version}".encode())


def stored(url: str, streams: list[uuid.UUID]) -> list[tuple[uuid.UUID, int, int, str]]:
    """(stream, version, notification id, transaction id) of the streams' rows, in log order."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT originator_id, originator_version, notification_id, transaction_id::text "
            "FROM events WHERE originator_id = ANY(%s) ORDER BY notification_id",
            (streams,),
        ).fetchall()


def advisory_waiters(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event = 'advisory' AND datname = current_database()"
        ).fetchone()
        return row[0] if row else 0


def test_appends_ready_together_share_a_transaction_and_a_conflict_fails_only_its_own(
    recorder: OwlClawApplicationRecorder, fresh_db: Database
) -> None:
    a, b, c, d = (uuid.uuid4() for _ in range(4))
    recorder.insert_events([event(c, 1)])
    results: dict[str, object] = {}

    def append(name: str, events: list[StoredEvent]) -> None:
        try:
            results[name] = recorder.insert_events(events)
        except IntegrityError as e:
            results[name] = e

    # Hold the append's critical section so that A's commit stays in flight while B, C and D
    # become ready: they queue behind it and commit together.
    with psycopg.connect(fresh_db.url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        first = threading.Thread(target=append, args=("a", [event(a, 1)]))
        first.start()
        wait_for(lambda: advisory_waiters(fresh_db.url) == 1, "A's commit to be in flight", 10)
        others = [
            threading.Thread(target=append, args=("b", [event(b, 1)])),
            threading.Thread(target=append, args=("c", [event(c, 1)])),  # stale: conflicts
            threading.Thread(target=append, args=("d", [event(d, 1), event(d, 2)])),
        ]
        for t in others:
            t.start()
        wait_for(lambda: recorder._group.waiting == 3, "B, C and D to queue", 10, poll_s=0.005)
        holder.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
    for t in [first, *others]:
        t.join(10)

    assert isinstance(results["c"], IntegrityError)
    assert f"{c}@1" in str(results["c"])
    rows = stored(fresh_db.url, [a, b, c, d])
    assert [(s, v) for s, v, _, _ in rows if s == c] == [(c, 1)]  # only the earlier event
    ids = {(s, v): n for s, v, n, _ in rows}
    assert results["a"] == [ids[(a, 1)]]
    assert results["b"] == [ids[(b, 1)]]
    assert results["d"] == [ids[(d, 1)], ids[(d, 2)]]
    transactions = {s: x for s, _, _, x in rows}
    assert transactions[b] == transactions[d] != transactions[a]  # B and D: one commit
    report = recorder.verify_chains([a, b, c, d])
    assert report.ok and report.events == 5


# An append: events of (stream index, skew) where skew 0 is the stream's next version, -1 one
# already stored (stale writer) and +1 past a gap (a writer whose earlier append failed).
appends = st.lists(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from([0, 0, 0, 0, -1, 1])), min_size=1, max_size=3
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(groups=st.lists(appends, min_size=1, max_size=3))
def test_grouped_appends_match_one_by_one_version_checks_and_chains_verify(
    recorder: OwlClawApplicationRecorder,
    fresh_db: Database,
    groups: list[list[list[tuple[int, int]]]],
) -> None:
    streams = [uuid.uuid4() for _ in range(4)]
    heads: dict[uuid.UUID, int] = defaultdict(int)
    for group in groups:
        batch, expected = [], []
        for append in group:
            tentative = dict(heads)
            events, ok = [], True
            for index, skew in append:
                stream = streams[index]
                version = max(1, tentative.get(stream, 0) + 1 + skew)
                ok = ok and version == tentative.get(stream, 0) + 1
                tentative[stream] = version
                events.append(event(stream, version))
            if ok:
                heads.update(tentative)
            batch.append(events)
            expected.append(ok)
        outcomes = recorder.append_group(batch)
        assert [not isinstance(o, BaseException) for o in outcomes] == expected
        for o in outcomes:
            assert isinstance(o, list | IntegrityError)
    rows = stored(fresh_db.url, streams)
    per_stream: dict[uuid.UUID, list[int]] = defaultdict(list)
    for stream, version, _, _ in rows:  # in log order
        per_stream[stream].append(version)
    assert dict(per_stream) == {s: list(range(1, h + 1)) for s, h in heads.items() if h}
    assert recorder.verify_chains(streams).ok


def test_agents_appending_together_through_the_ledger_keep_order_and_chains(
    fresh_db: Database,
) -> None:
    agents, commits = 12, 15
    with Ledger(fresh_db.url, pool_size=2) as ledger:

        def agent_loop(agent_id: str) -> None:
            agent = ledger.register_agent(agent_id)
            for _ in range(commits):
                agent.record(ev.IdentityLoaded, soul_sha256=agent_id, identity_sha256="x")
                ledger.append(agent)

        threads = [threading.Thread(target=agent_loop, args=(f"a{n}",)) for n in range(agents)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        report = ledger.chains.verify()
        assert report.ok and report.streams == agents
        assert report.events == agents * (commits + 1)
        log = ledger.log.read(0, limit=10_000)
        versions: dict[uuid.UUID, list[int]] = defaultdict(list)
        for logged in log:
            versions[logged.event.originator_id].append(logged.event.originator_version)
        assert all(v == list(range(1, commits + 2)) for v in versions.values())
        assert [e.position for e in log] == sorted(e.position for e in log)


def test_a_crash_mid_group_loses_no_acknowledged_event(fresh_db: Database) -> None:
    with Ledger(fresh_db.url):
        pass  # the tables exist before the writer starts
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tests.integration.processes import append_until_killed; "
            "append_until_killed(sys.argv[1], 8)",
            fresh_db.url,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert child.stdout is not None
    acked = [child.stdout.readline() for _ in range(80)]
    with psycopg.connect(fresh_db.url, autocommit=True) as holder:
        # A group's commit is now held in flight (its leader waits in the critical section)
        # while the other agents queue behind it: kill the writer there.
        holder.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        wait_for(lambda: advisory_waiters(fresh_db.url) == 1, "a group in flight", 30)
        child.send_signal(signal.SIGKILL)
        acked += child.stdout.readlines()
        child.wait(10)
        holder.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
    last_acked: dict[str, int] = defaultdict(int)
    for line in acked:
        agent_id, version = line.split()
        last_acked[agent_id] = max(last_acked[agent_id], int(version))
    assert len(last_acked) == 8
    with Ledger(fresh_db.url) as ledger:
        for agent_id, last in last_acked.items():
            assert len(ledger.stream(agent_stream_id(agent_id))) >= last, agent_id
        assert ledger.chains.verify().ok
