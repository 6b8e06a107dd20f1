"""Shared fixtures: one embedded PostgreSQL for the whole session, a fresh database per use.

With ``CI=true`` a missing real component is a failure; locally it is a clear skip (components.py).

No Hypothesis example has a deadline: Hypothesis fails an example that takes longer than its
deadline (200 ms unless a test sets one), which a loaded machine does to an example that is merely
slow there, not wrong. No test depends on how fast the machine is.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database, DatabaseUnavailable, open_database
from projections.embedders import LOCAL_MODEL, Embedder, EmbeddingUnavailable, embedder_for
from tests.components import missing_component

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
settings.register_profile("owlclaw", deadline=None)  # over the loaded one (CI's, if in CI)
settings.load_profile("owlclaw")


@pytest.fixture(autouse=True)
def own_server_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own server address. A reading command asks the server at the configured
    address, and on the shared default port another test's server would answer it (or reset the
    connection as it stops: CI104). A test that serves passes this port on or sets its own."""
    monkeypatch.setenv("OWLCLAW_SERVER_PORT", str(free_port()))


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Database:
    url = os.environ.get("OWLCLAW_DATABASE_URL")
    data_dir = Path(os.environ.get("OWLCLAW_TEST_DATA_DIR") or tmp_path_factory.mktemp("owlclaw"))
    config = OwlClawConfig(data_dir=str(data_dir), database_url=url, database_name="postgres")
    try:
        return open_database(config)
    except DatabaseUnavailable as e:
        missing_component("PostgreSQL", e)
        raise


@pytest.fixture
def fresh_db(pg_server: Database) -> Iterator[Database]:
    """A new, empty database on the session's server, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    yield db
    pg_server.drop_database(name)


@pytest.fixture(scope="session")
def local_embedder() -> Embedder:
    """The real all-MiniLM-L6-v2 model, loaded once per session."""
    embedder = embedder_for(LOCAL_MODEL)
    try:
        embedder.embed(["warm up"])
    except EmbeddingUnavailable as e:
        missing_component("the local embedding model", e)
    return embedder
