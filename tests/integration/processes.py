"""Functions run in separate processes by the integration tests (importable under spawn)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from eventsourcing.persistence import StoredEvent

from events import Ledger, StreamConflict
from events import catalog as ev
from events.postgres import datastore_from_url
from events.recorder import OwlClawApplicationRecorder


def append_batches(url: str, table: str, writer: int, batches: int, batch: int, start: Any) -> None:
    """Append ``batches`` commits of ``batch`` events each to this writer's own stream."""
    datastore = datastore_from_url(url, pool_size=1, max_overflow=0)
    datastore.register_type_adapters()
    recorder = OwlClawApplicationRecorder(datastore, events_table_name=table)
    stream = uuid.uuid5(uuid.NAMESPACE_OID, f"writer-{writer}")
    start.wait()
    version = 0
    for _ in range(batches):
        events = []
        for _ in range(batch):
            version += 1
            events.append(StoredEvent(stream, version, "Stress", f"{writer}:{version}".encode()))
        recorder.insert_events(events)
    recorder.close_notifier()
    datastore.close()


def contend_for_next_version(url: str, agent_id: str, start: Any, results: Any) -> None:
    """Load the agent, wait for the rival, then try to append the same next version."""
    with Ledger(url) as ledger:
        agent = ledger.load_agent(agent_id)
        agent.record(ev.IdentityLoaded, soul_sha256=uuid.uuid4().hex, identity_sha256="x")
        start.wait()
        try:
            ledger.append(agent)
            results.put(("committed", agent.version))
        except StreamConflict as e:
            results.put(("conflict", str(e)))
        time.sleep(0.1)


def run_projection(url: str, view_name: str) -> None:
    """Catch a projection up, slowly enough (small batches) to be killed in the middle."""
    from projections import VIEWS
    from projections import runner as runner_module

    runner_module.BATCH_SIZE = 200
    with Ledger(url) as ledger:
        view = VIEWS[view_name](ledger)
        view.create_table()
        runner_module.ProjectionRunner(ledger, view).catch_up()


def run_outbox(url: str) -> None:
    """Deliver the outbox's messages (the test kills this process inside a delivery)."""
    from projections import Outbox, ProjectionRunner

    with Ledger(url) as ledger:
        view = Outbox(ledger)
        view.create_table()
        ProjectionRunner(ledger, view).catch_up()


def append_until_killed(url: str, agents: int) -> None:
    """Agents (one thread each) append one event per commit until the process is killed,
    printing ``<agent_id> <version>`` for each acknowledged commit."""
    import sys
    import threading

    ledger = Ledger(url)
    printing = threading.Lock()

    def agent_loop(agent_id: str) -> None:
        agent = ledger.register_agent(agent_id)
        while True:
            agent.record(ev.IdentityLoaded, soul_sha256=uuid.uuid4().hex, identity_sha256="x")
            ledger.append(agent)
            with printing:
                sys.stdout.write(f"{agent_id} {agent.version}\n")
                sys.stdout.flush()

    for n in range(agents):
        threading.Thread(target=agent_loop, args=(f"crash-{n}",), daemon=True).start()
    threading.Event().wait()
