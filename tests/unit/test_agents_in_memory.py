"""The ``Agents`` contract (tests/agents_contract.py) held against the
in-process mailbox host on the in-memory ledger: the same tests, no database, in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.host import AgentHost
from events import Ledger
from owlclaw.agents import Agents
from owlclaw.config import OwlClawConfig, RuntimeConfig
from tests.agents_contract import (
    SCRIPTS,
    Setting,
    test_a_batch_runs_parallel_calls_side_by_side_around_a_barrier,
    test_a_heartbeat_acts_only_on_what_the_agent_received,
    test_a_retried_trigger_with_the_same_idempotency_key_gets_the_same_run,
    test_a_second_delivery_of_a_fire_is_a_duplicate_and_starts_no_run,
    test_a_second_writer_fences_the_host_and_the_streams_never_fork,
    test_a_trigger_is_accepted_at_once_while_another_agent_of_the_host_waits_on_a_tool,
    test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger,
    test_an_interrupted_run_resumes_first_then_runs_accepted_before_the_crash,
    test_an_unknown_agent_is_a_clear_error,
    test_runs_and_fires_of_one_agent_execute_one_at_a_time_in_acceptance_order,
    test_status_answers_during_a_run_and_cancel_ends_it_while_the_mailbox_goes_on,
    test_tools_are_switched_through_the_agents_writer,
)

__all__ = [
    "test_a_batch_runs_parallel_calls_side_by_side_around_a_barrier",
    "test_a_heartbeat_acts_only_on_what_the_agent_received",
    "test_a_retried_trigger_with_the_same_idempotency_key_gets_the_same_run",
    "test_a_second_delivery_of_a_fire_is_a_duplicate_and_starts_no_run",
    "test_a_second_writer_fences_the_host_and_the_streams_never_fork",
    "test_a_trigger_is_accepted_at_once_while_another_agent_of_the_host_waits_on_a_tool",
    "test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger",
    "test_an_interrupted_run_resumes_first_then_runs_accepted_before_the_crash",
    "test_an_unknown_agent_is_a_clear_error",
    "test_runs_and_fires_of_one_agent_execute_one_at_a_time_in_acceptance_order",
    "test_status_answers_during_a_run_and_cancel_ends_it_while_the_mailbox_goes_on",
    "test_tools_are_switched_through_the_agents_writer",
]


@pytest.fixture
def setting(tmp_path: Path) -> Setting:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name, script in SCRIPTS.items():
        (scripts / f"{name}.json").write_text(json.dumps(script))
    config = OwlClawConfig(
        runtime=RuntimeConfig(models=("scripted/answer",), scripts_dir=str(scripts))
    )
    ledger = Ledger.in_memory()

    def make(idle_s: float | None) -> Agents:
        return AgentHost(ledger, config, idle_s=idle_s)

    apps = tmp_path / "apps"
    apps.mkdir()
    return Setting("memory", ledger, config, make, apps)
