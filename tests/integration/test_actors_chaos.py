"""Chaos: agent host processes are SIGKILLed at random while 500 runs of 20 agents execute.

Each run's model answers with a batch (two list_schedules side by side, then log_decision).
Afterwards the ledger must show: every accepted run, each with exactly one end event; no forked
stream (contiguous versions, contiguous run numbers); no tool execution completed twice; each
batch's requests written ahead of its first outcome; and the projections must equal a rebuild
from position 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from actors.directory import AgentDirectory
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.messages import Result, RunResult, Submit, SubmitAndWait
from projections import AuditView, ProjectionRunner, RunsView
from projections.rebuild import rebuild
from projections.view import View
from tests.components import missing_component

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]
AGENTS, RUNS_PER_AGENT, KILLS = 20, 25, 6
TERMINAL = {c.__name__ for c in ev.TERMINAL_RUN_EVENTS}


@pytest.fixture(scope="module")
def setting(pg_server: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import ray

    from actors.cluster import connect

    db = pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    scripts = tmp_path_factory.mktemp("scripts")
    decide = {"name": "log_decision", "arguments": {"reasoning": "go", "decision_type": "other"}}
    listed = {"name": "list_schedules", "arguments": {}}
    batch = [listed, listed, decide]  # two side by side, then a barrier
    script = {"steps": [{"tool_calls": batch}], "latency_s": 0.01}
    (scripts / "chaos.json").write_text(json.dumps(script))
    config = OwlClawConfig(
        database_url=db.url,
        database_name=str(db.params["dbname"]),
        runtime=RuntimeConfig(models=("scripted/chaos",), scripts_dir=str(scripts)),
    )
    try:
        connect(config, num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:
        missing_component("a local Ray cluster", e)
    yield config, db
    ray.shutdown()
    pg_server.drop_database(str(db.params["dbname"]))


def rows(view: View, table: str) -> list[tuple[Any, ...]]:
    with view.transaction(commit=False) as curs:
        found = curs.execute(view.sql(f"SELECT * FROM {{{table}}}")).fetchall()
    return sorted(tuple(str(v) for v in r.values()) for r in found)


def storm(
    directory: AgentDirectory, agents: list[str], rng: random.Random
) -> tuple[list[tuple[str, str]], int]:
    """Submit RUNS_PER_AGENT runs to every agent while SIGKILLing random host processes."""
    import ray

    died = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
    hosts = {directory.actor_name(a): a for a in agents}  # one agent to reach each host
    accepted: list[tuple[str, str]] = []
    kills = 0

    async def submit(agent_id: str) -> None:
        for _ in range(RUNS_PER_AGENT):
            while True:  # a client retries when the host died before answering; if it had
                try:  # committed the run already, that run is an extra one, never a lost one
                    accepted.append(
                        (
                            agent_id,
                            await directory.ask(Submit(agent_id=agent_id, trigger="webhook")),
                        )
                    )
                    break
                except died:
                    await asyncio.sleep(0.2)

    async def killer() -> None:
        nonlocal kills
        while kills < KILLS:
            await asyncio.sleep(rng.uniform(0.3, 0.9))
            try:
                pid = await directory.handle(hosts[rng.choice(sorted(hosts))]).pid.remote()
            except died:
                continue
            os.kill(pid, signal.SIGKILL)
            kills += 1

    async def both() -> None:
        await asyncio.gather(killer(), *(submit(a) for a in agents))

    asyncio.run(both())
    return accepted, kills


def settle(ledger: Ledger, directory: AgentDirectory, agents: list[str]) -> None:
    """Activate agents until every run has ended (runs accepted just before a kill included)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        open_agents = {
            a for a in agents for r in ledger.list_runs(a) if not ledger.load_run(r).state.ended
        }
        if not open_agents:
            return
        for agent_id in open_agents:
            asyncio.run(
                directory.ask(SubmitAndWait(agent_id=agent_id, trigger="webhook"))
            )  # activation resumes/starts them


def assert_consistent(ledger: Ledger, agents: list[str], accepted: list[tuple[str, str]]) -> int:
    total = 0
    for agent_id in agents:
        agent = ledger.load_agent(agent_id)
        stream = ledger.stream(agent.id)
        assert [e.originator_version for e in stream] == list(range(1, len(stream) + 1))
        queued = [e.run_no for e in stream if isinstance(e, ev.RunQueued)]
        assert queued == list(range(1, len(queued) + 1))  # no fork of the agent stream
        for run_id in agent.run_ids():
            events = ledger.stream(run_id)
            total += 1
            assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
            kinds = [type(e).__name__ for e in events]
            assert sum(k in TERMINAL for k in kinds) == 1, kinds  # exactly one end
            done = [e.call_id for e in events if isinstance(e, ev.ToolCallSucceeded)]
            assert len(done) == len(set(done))  # no tool execution completed twice
            assert_requests_written_ahead(events)
            decided = [e.call_id for e in events if isinstance(e, ev.DecisionLogged)]
            assert len(decided) == len(set(decided))
    recorded = {str(r) for a in agents for r in ledger.load_agent(a).run_ids()}
    assert {r for _, r in accepted} <= recorded  # nothing accepted was lost
    return total


def assert_requests_written_ahead(events: list[ev.LedgerEvent]) -> None:
    """No request of a model response's batch comes after an outcome of that batch."""
    outcomes = ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolOutcomeUnknown
    settling = False
    for e in events:
        if isinstance(e, ev.LLMResponded):
            settling = False
        elif isinstance(e, outcomes):
            settling = True
        elif isinstance(e, ev.ToolCallRequested):
            assert not settling, f"request {e.call_id} after an outcome of its batch"


def assert_projections_equal_a_rebuild(ledger: Ledger) -> None:
    for view_class in (RunsView, AuditView):
        live = view_class(ledger)
        live.create_table()
        ProjectionRunner(ledger, live).catch_up()
        before = {t: rows(live, t) for t in view_class.tables}
        rebuild(ledger, view_class)
        after = {t: rows(view_class(ledger), t) for t in view_class.tables}
        assert before == after


def test_killing_agent_hosts_at_random_loses_forks_and_doubles_nothing(setting: Any) -> None:
    config, db = setting
    with Ledger(db.url) as ledger:
        directory = AgentDirectory(ledger, config, placement="shared", pool_size=4)
        agents = [f"chaos-{i}" for i in range(AGENTS)]
        for agent_id in agents:
            ledger.register_agent(agent_id)
        for agent_id in {directory.actor_name(a): a for a in agents}.values():
            asyncio.run(
                directory.ask(SubmitAndWait(agent_id=agent_id, trigger="webhook"))
            )  # every host up before the storm
        accepted, kills = storm(directory, agents, random.Random(7))

        async def results() -> list[RunResult]:
            return list(
                await asyncio.gather(
                    *(directory.ask(Result(agent_id=a, run_id=r)) for a, r in accepted)
                )
            )

        statuses = {r.status for r in asyncio.run(results())}
        settle(ledger, directory, agents)
        asyncio.run(directory.close())
        assert kills == KILLS and len(accepted) == AGENTS * RUNS_PER_AGENT
        assert statuses <= {"completed", "terminated", "failed"}
        assert assert_consistent(ledger, agents, accepted) >= AGENTS * RUNS_PER_AGENT
        assert_projections_equal_a_rebuild(ledger)
