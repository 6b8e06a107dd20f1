"""The ledger contract on ``Ledger.in_memory()``, and what only the in-memory ledger does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from events import Ledger, NoDatabase
from tests.ledger_contract import LedgerContract


class TestInMemoryLedger(LedgerContract):
    @pytest.fixture
    def ledger(self) -> Iterator[Ledger]:
        with Ledger.in_memory(snapshot_interval=10) as led:
            yield led


def test_read_models_get_a_clear_error_instead_of_a_database() -> None:
    with Ledger.in_memory() as ledger:
        with pytest.raises(NoDatabase, match="in-memory ledger has no PostgreSQL database"):
            _ = ledger.datastore
        with pytest.raises(NoDatabase):
            _ = ledger.notify_channel
