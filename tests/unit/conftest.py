"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from events import Ledger


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    """An empty in-memory ledger: the Ledger API without a database."""
    with Ledger.in_memory() as led:
        yield led
