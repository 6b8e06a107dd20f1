"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from events import Ledger
from owlclaw.database import Database


@pytest.fixture
def ledger(fresh_db: Database) -> Iterator[Ledger]:
    """A ledger on a fresh, empty database."""
    with Ledger(fresh_db.url) as led:
        yield led
