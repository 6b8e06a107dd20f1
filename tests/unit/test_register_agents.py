"""Batch registration on the in-memory ledger: the same contract as on PostgreSQL."""

from __future__ import annotations

import pytest

from events import Ledger


def test_batch_registration_skips_registered_agents_and_spans_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("events.ledger.REGISTER_BATCH", 3)
    ledger = Ledger.in_memory()
    ledger.register_agent("b", app_dir="/first")
    assert ledger.register_agents(["a", "b", "c", "d", "e", "a"], app_dir="/apps") == 4
    assert ledger.register_agents(["e", "f"]) == 1
    assert ledger.agent_ids() == ["b", "a", "c", "d", "e", "f"]
    assert ledger.load_agent("b").state.app_dir == "/first"
    assert ledger.load_agent("d").state.app_dir == "/apps"
    assert ledger.chains.verify().ok
