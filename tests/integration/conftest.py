"""Fixtures of the integration tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from events import Ledger
from events.postgres import datastore_from_url
from events.recorder import OwlClawApplicationRecorder
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from tests.browser import browser, console  # noqa: F401 - the console's browser tests
from tests.components import missing_component
from tests.langfuse_receiver import langfuse  # noqa: F401 - Langfuse's stand-in, for tracing tests
from tests.webhooks import receiver  # noqa: F401 - a fixture of every integration test


@pytest.fixture
def ledger(fresh_db: Database) -> Iterator[Ledger]:
    """A ledger on a fresh, empty database."""
    with Ledger(fresh_db.url) as led:
        yield led


@pytest.fixture(scope="module")
def db(pg_server: Database) -> Iterator[Database]:
    """A new, empty database shared by the tests of one module (agents on Ray actors outlive a
    test: the module's tests share their actors' database)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture
def recorder(fresh_db: Database) -> Iterator[OwlClawApplicationRecorder]:
    """OwlClaw's recorder on a fresh database, with its events table."""
    rec = OwlClawApplicationRecorder(datastore_from_url(fresh_db.url), events_table_name="events")
    rec.create_table()
    yield rec
    rec.close_notifier()
    rec.datastore.close()


@pytest.fixture
def ray_cluster() -> None:
    """A local Ray cluster, started by the first test that needs one and kept for the session
    (a test that starts a cluster of its own shuts it down; the next one starts this again)."""
    import ray

    from actors.cluster import connect

    if ray.is_initialized():
        return
    try:  # started the way a driver without OWLCLAW_RAY_ADDRESS starts one
        connect(OwlClawConfig(), num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:
        missing_component("a local Ray cluster", e)
