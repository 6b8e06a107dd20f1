"""The ``Agents`` contract (tests/agents_contract.py) held against both implementations on
PostgreSQL: the in-process mailbox host (``local``) and the Ray directory of host actors (``ray``,
shared placement, one host actor, shared by the module's tests)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.directory import AgentDirectory
from actors.host import AgentHost
from events import Ledger
from owlclaw.agents import Agents
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from tests.agents_contract import (
    SCRIPTS,
    Setting,
    test_a_batch_runs_parallel_calls_side_by_side_around_a_barrier,
    test_a_blocking_sync_tool_times_out_while_another_agent_of_the_host_completes_runs,
    test_a_heartbeat_acts_only_on_what_the_agent_received,
    test_a_retried_trigger_with_the_same_idempotency_key_gets_the_same_run,
    test_a_schedule_is_cancelled_through_the_agents_writer_during_a_run,
    test_a_second_delivery_of_a_fire_is_a_duplicate_and_starts_no_run,
    test_a_second_writer_fences_the_host_and_the_streams_never_fork,
    test_a_trigger_is_accepted_at_once_while_another_agent_of_the_host_waits_on_a_tool,
    test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger,
    test_an_interrupted_run_resumes_first_then_runs_accepted_before_the_crash,
    test_an_overdue_approval_expires_through_the_agents_writer,
    test_an_unknown_agent_is_a_clear_error,
    test_parked_runs_wait_for_their_answers_while_the_mailbox_goes_on,
    test_runs_and_fires_of_one_agent_execute_one_at_a_time_in_acceptance_order,
    test_status_answers_during_a_run_and_cancel_ends_it_while_the_mailbox_goes_on,
    test_tools_are_switched_through_the_agents_writer,
    test_what_the_host_accepts_during_a_run_queues_behind_it_and_breaks_nothing,
)

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]
__all__ = [
    "test_a_batch_runs_parallel_calls_side_by_side_around_a_barrier",
    "test_a_blocking_sync_tool_times_out_while_another_agent_of_the_host_completes_runs",
    "test_a_heartbeat_acts_only_on_what_the_agent_received",
    "test_a_retried_trigger_with_the_same_idempotency_key_gets_the_same_run",
    "test_a_schedule_is_cancelled_through_the_agents_writer_during_a_run",
    "test_a_second_delivery_of_a_fire_is_a_duplicate_and_starts_no_run",
    "test_a_second_writer_fences_the_host_and_the_streams_never_fork",
    "test_a_trigger_is_accepted_at_once_while_another_agent_of_the_host_waits_on_a_tool",
    "test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger",
    "test_an_interrupted_run_resumes_first_then_runs_accepted_before_the_crash",
    "test_an_overdue_approval_expires_through_the_agents_writer",
    "test_an_unknown_agent_is_a_clear_error",
    "test_parked_runs_wait_for_their_answers_while_the_mailbox_goes_on",
    "test_runs_and_fires_of_one_agent_execute_one_at_a_time_in_acceptance_order",
    "test_status_answers_during_a_run_and_cancel_ends_it_while_the_mailbox_goes_on",
    "test_tools_are_switched_through_the_agents_writer",
    "test_what_the_host_accepts_during_a_run_queues_behind_it_and_breaks_nothing",
]


@pytest.fixture(scope="module")
def base_config(db: Database, tmp_path_factory: pytest.TempPathFactory) -> OwlClawConfig:
    scripts = tmp_path_factory.mktemp("scripts")
    for name, script in SCRIPTS.items():
        (scripts / f"{name}.json").write_text(json.dumps(script))
    return OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/answer",), scripts_dir=str(scripts)),
    )


@pytest.fixture(scope="module")
def module_ledger(db: Database) -> Iterator[Ledger]:
    with Ledger(db.url) as led:
        yield led


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("apps")


@pytest.fixture(scope="module")
def ray_hosts(module_ledger: Ledger, base_config: OwlClawConfig) -> Iterator[dict[Any, Agents]]:
    """The Ray setting's directories, one per idle time, shared by the module's tests (a host
    actor starts once); their actors are killed at the end."""
    directories: dict[Any, Agents] = {}
    yield directories
    import ray

    for directory in directories.values():
        assert isinstance(directory, AgentDirectory)
        namespace = directory.actor_options["namespace"]
        with contextlib.suppress(ValueError):  # never started
            ray.kill(ray.get_actor(directory.actor_name("any"), namespace=namespace))


@pytest.fixture(params=["local", "ray"])
def setting(
    request: pytest.FixtureRequest,
    module_ledger: Ledger,
    base_config: OwlClawConfig,
    apps: Path,
) -> Setting:
    if request.param == "local":

        def make_local(idle_s: float | None) -> Agents:
            return AgentHost(module_ledger, base_config, idle_s=idle_s)

        return Setting("local", module_ledger, base_config, make_local, apps)
    request.getfixturevalue("ray_cluster")
    directories: dict[Any, Agents] = request.getfixturevalue("ray_hosts")

    def make_ray(idle_s: float | None) -> Agents:
        if idle_s not in directories:
            directories[idle_s] = AgentDirectory(
                module_ledger,
                base_config,
                placement="shared",
                pool_size=1,
                idle_s=idle_s,
                actor_options={"namespace": f"conformance-{uuid.uuid4().hex[:8]}"},
                owner=False,  # closing it after a test leaves the host actor for the next
            )
        return directories[idle_s]

    return Setting("ray", module_ledger, base_config, make_ray, apps)
