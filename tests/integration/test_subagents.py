"""Sub-agents on the real ledger: a parent's run spawns real agents (own streams, placed by
its host), parks until they end, and gets their answers; costs roll up to the parent's run;
limits and the parent's tool-set narrowing hold."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.directory import AgentDirectory
from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Activate, Cancel, Message, SubAgentFinished, Submit
from owlclaw.tools.subagents import watch_subagents
from tests.apps import make_app
from tests.cli import owlclaw
from tests.scripted import call

pytestmark = pytest.mark.integration

TASKS = ("survey owls", "survey hawks", "survey kites")
PATIENCE_S = 240
"""How long a wait for what the test expects may last: a guard against a hang, not a check of
speed (a loaded CI machine starts Ray actors slowly); two such waits fit pytest's 600 s."""


def spawning_app(tmp_path: Path, name: str, *, wait: bool = True) -> Path:
    """A parent that hands three tasks to its ``researcher`` profile, then sums up."""
    root = make_app(
        tmp_path / name,
        config=f'[agent]\nmodels = ["scripted/{name}"]\n[tools]\nenable = ["spawn_agent"]\n',
    )
    researcher = make_app(
        root / "subagents" / "researcher",
        config='[agent]\nmodels = ["scripted/researcher"]\n',
    )
    assert researcher.is_dir()
    register_script(
        name,
        [
            {
                "tool_calls": [
                    call("spawn_agent", task=task, profile="researcher", wait=wait)
                    for task in TASKS
                ]
            },
            {"content": "summed up"},
        ],
    )
    register_script(
        "researcher",
        {
            "cases": [{"when": task, "steps": [{"content": f"{task}: done"}]} for task in TASKS],
            "prompt_tokens": 1000,
            "completion_tokens": 50,
        },
    )
    return root


def has_ended(ledger: Ledger, run_id: uuid.UUID) -> bool:
    """Read from the stream: a run accepted but not yet started has no Run aggregate."""
    return any(isinstance(e, ev.RunEnded) for e in ledger.stream(run_id))


def ended(ledger: Ledger, run_id: str, timeout_s: float = PATIENCE_S) -> ev.LedgerEvent:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = ledger.stream(uuid.UUID(run_id))
        end = [e for e in events if isinstance(e, ev.RunEnded)]
        if end:
            return end[0]
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not end in {timeout_s} s")


def inbound(ledger: Ledger, agent_id: str) -> list[ev.InboundReceived]:
    events = ledger.stream(ledger.load_agent(agent_id).id)
    return [e for e in events if isinstance(e, ev.InboundReceived)]


def run_parent(
    ledger: Ledger, root: Path, agent_id: str, until: Callable[[], bool] = lambda: True
) -> str:
    """Serve the parent's run on an in-process host until it ended and ``until()`` holds."""

    def settled(run_id: str) -> None:
        ended(ledger, run_id)
        deadline = time.monotonic() + PATIENCE_S
        while not until():
            assert time.monotonic() < deadline, "the host did not settle"
            time.sleep(0.1)

    async def go() -> str:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
        try:
            ledger.attach_app(agent_id, str(root))
            run_id = await host.ask(Submit(agent_id=agent_id, trigger="webhook"))
            await asyncio.to_thread(settled, run_id)
            return run_id
        finally:
            await host.close()

    return asyncio.run(go())


def test_a_parent_waits_for_three_sub_agents_and_gets_their_answers(
    ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    root = spawning_app(tmp_path, "boss")
    run_id = run_parent(ledger, root, "boss")
    events = ledger.stream(uuid.UUID(run_id))
    end = ended(ledger, run_id)
    assert isinstance(end, ev.RunCompleted) and end.answer == "summed up"
    results = [e.result for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert sorted(r["answer"] for r in results) == sorted(f"{t}: done" for t in TASKS)
    assert {r["status"] for r in results} == {"completed"}
    assert any(isinstance(e, ev.RunParked) and e.spawn_id for e in events)
    parent = ledger.load_agent("boss")
    children = {s.child_agent_id for s in parent.state.spawns.values()}
    assert len(children) == 3 and all(c.startswith("boss.researcher-") for c in children)
    for child in children:
        state = ledger.load_agent(child).state
        assert (state.parent_agent_id, state.depth) == ("boss", 1)
        assert state.app_dir == str(root / "subagents" / "researcher")
    charged = [e for e in events if isinstance(e, ev.SubAgentCharged)]
    assert len(charged) == 3 and all(c.tokens == 1050 for c in charged)
    assert end.tokens == 2 * 120 + 3 * 1050  # the parent's two model calls and its children
    env = {**os.environ, "OWLCLAW_DATABASE_URL": fresh_db.url}
    env["OWLCLAW_DATABASE_NAME"] = str(fresh_db.params["dbname"])
    shown = owlclaw(env, "ledger", "boss", cwd=tmp_path).stdout
    assert "sub-agents of boss" in shown
    assert all(child in shown for child in children) and shown.count("[completed]") == 3


def test_without_wait_the_answers_arrive_as_inbound_events(ledger: Ledger, tmp_path: Path) -> None:
    root = spawning_app(tmp_path, "delegator", wait=False)
    run_id = run_parent(
        ledger, root, "delegator", until=lambda: len(inbound(ledger, "delegator")) == 3
    )
    results = [
        e.result for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.ToolCallSucceeded)
    ]
    assert [r["status"] for r in results] == ["started"] * 3
    arrived = inbound(ledger, "delegator")
    assert sorted(e.payload["answer"] for e in arrived) == sorted(f"{t}: done" for t in TASKS)
    assert {e.source for e in arrived} == {"subagent"}


def test_depth_children_per_run_profiles_and_withheld_tools_are_enforced(
    ledger: Ledger, tmp_path: Path
) -> None:
    """Every agent of the tree plays the same script: a missing profile, then t1, t2, t3."""
    root = make_app(
        tmp_path / "nest",
        config='[agent]\nmodels = ["scripted/nest"]\n'
        '[tools]\nenable = ["spawn_agent", "send_message"]\n'
        "[tools.spawn]\nmax_children_per_run = 2\n"
        '[tools.channels.ops]\nurl = "http://127.0.0.1:9/never"\n',
    )
    register_script(
        "nest",
        [
            {
                "tool_calls": [
                    call("spawn_agent", task="t0", profile="ghost"),
                    call("spawn_agent", task="t1"),
                    call("spawn_agent", task="t2"),
                    call("spawn_agent", task="t3"),
                ]
            },
            {"content": "done"},
        ],
    )
    run_id = run_parent(ledger, root, "nest")
    assert isinstance(ended(ledger, run_id), ev.RunCompleted)

    def outcomes(agent_id: str, run: uuid.UUID) -> list[str]:
        """The calls' outcomes, sorted (the parked calls' outcomes come after the others)."""
        return sorted(
            (e.error_code or "TOOL_DENIED")
            if isinstance(e, ev.ToolCallFailed | ev.ToolCallDenied)
            else "ok"
            for e in ledger.stream(run)
            if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallDenied)
        )

    assert outcomes("nest", uuid.UUID(run_id)) == ["SPAWN_LIMIT", "UNKNOWN_PROFILE", "ok", "ok"]
    children = [s.child_agent_id for s in ledger.load_agent("nest").state.spawns.values()]
    grandchildren = []
    for child in children:
        state = ledger.load_agent(child).state
        assert (state.depth, state.withheld_tools) == (1, ["send_message"])
        [run] = ledger.load_agent(child).run_ids()
        assert outcomes(child, run) == ["SPAWN_LIMIT", "UNKNOWN_PROFILE", "ok", "ok"]
        grandchildren += [s.child_agent_id for s in state.spawns.values()]
    assert len(grandchildren) == 4
    for grandchild in grandchildren:
        agent = ledger.load_agent(grandchild)
        assert (agent.state.depth, agent.state.withheld_tools) == (
            2,
            ["send_message", "spawn_agent"],
        )
        [run] = agent.run_ids()
        [visible] = [e for e in ledger.stream(run) if isinstance(e, ev.VisibleToolsResolved)]
        assert "spawn_agent" not in visible.tools and "send_message" not in visible.tools
        assert visible.filtered["spawn_agent"] == "not given to this sub-agent"
        # the third refusal in a row is a doom loop: the run ends after the response's batch
        # (its four calls refused), reported upwards
        assert outcomes(grandchild, run) == ["TOOL_DENIED"] * 4
        assert isinstance(ended(ledger, str(run)), ev.RunTerminated)


def test_cancelling_a_waiting_parent_cancels_its_running_children(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(
        tmp_path / "impatient",
        config='[agent]\nmodels = ["scripted/impatient"]\n[tools]\nenable = ["spawn_agent"]\n',
    )
    make_app(root / "subagents" / "slow", config='[agent]\nmodels = ["scripted/slow"]\n')
    register_script(
        "impatient",
        [{"tool_calls": [call("spawn_agent", task=f"t{i}", profile="slow") for i in (1, 2)]}],
    )
    register_script("slow", {"steps": [{"content": "late"}], "latency_s": 60})

    async def go() -> tuple[str, list[str]]:
        host = AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
        try:
            ledger.attach_app("impatient", str(root))
            run_id = await host.ask(Submit(agent_id="impatient", trigger="webhook"))
            deadline = time.monotonic() + PATIENCE_S
            while True:  # both children are inside their (slow) model call
                running = [a for a, s in host.status_now().agents.items() if s.running]
                if len([a for a in running if a.startswith("impatient.slow-")]) == 2:
                    break
                assert time.monotonic() < deadline, "the children did not start"
                await asyncio.sleep(0.05)
            assert await host.ask(Cancel(agent_id="impatient", run_id=run_id))
            spawns = ledger.load_agent("impatient").state.spawns.values()
            child_runs = [str(s.child_run_id) for s in spawns]
            for child_run in child_runs:
                await asyncio.to_thread(ended, ledger, child_run, 30)
            return run_id, child_runs
        finally:
            await host.close()

    run_id, child_runs = asyncio.run(go())
    parent_end = ended(ledger, run_id)
    assert isinstance(parent_end, ev.RunTerminated) and parent_end.reason == "cancelled"
    for child_run in child_runs:
        assert isinstance(ended(ledger, child_run), ev.RunTerminated)


@pytest.mark.xdist_group("ray")
def test_on_ray_a_child_whose_host_is_killed_finishes_and_the_parent_gets_all_three(
    ray_cluster: None, ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    root = make_app(
        tmp_path / "rayboss",
        config='[agent]\nmodels = ["scripted/rayboss"]\n[tools]\nenable = ["spawn_agent"]\n',
    )
    researcher = make_app(
        root / "subagents" / "researcher", config='[agent]\nmodels = ["scripted/search"]\n'
    )
    # the victim's first model call lasts until its host is killed (the script is rewritten
    # before the kill, so its restarted host answers at once): it is inside that call, or
    # not yet at it, however slowly the hosts start (spawn_agent is a barrier, so the three
    # spawns are committed together once the last child has started)
    watcher = make_app(
        root / "subagents" / "watcher", config='[agent]\nmodels = ["scripted/slowsearch"]\n'
    )
    *others, last = TASKS
    spawned = [call("spawn_agent", task=t, profile="researcher") for t in others]
    steps = [{"tool_calls": [*spawned, call("spawn_agent", task=last, profile="watcher")]}]

    def child_script(latency_s: float) -> dict[str, Any]:
        return {
            "cases": [{"when": t, "steps": [{"content": f"{t}: done"}]} for t in TASKS],
            "latency_s": latency_s,
            "prompt_tokens": 1000,
            "completion_tokens": 50,
        }

    for app, name, script in (
        (root, "rayboss", {"steps": [*steps, {"content": "summed up"}]}),
        (researcher, "search", child_script(0.0)),
        (watcher, "slowsearch", child_script(3600.0)),
    ):
        (app / "scripts").mkdir()
        (app / "scripts" / f"{name}.json").write_text(json.dumps(script))
    config = OwlClawConfig(
        database_url=fresh_db.url,
        database_name=str(fresh_db.params["dbname"]),
        runtime=RuntimeConfig(models=("x",)),
    )
    directory = AgentDirectory(ledger, config, placement="dedicated")
    ledger.attach_app("rayboss", str(root))

    async def go() -> str:
        run_id = await directory.ask(Submit(agent_id="rayboss", trigger="webhook"))
        deadline = time.monotonic() + PATIENCE_S  # four cold actor starts
        while len(ledger.load_agent("rayboss").state.spawns) < 3:
            assert time.monotonic() < deadline, "the parent did not spawn three sub-agents"
            await asyncio.sleep(0.1)
        spawns = ledger.load_agent("rayboss").state.spawns.values()
        [victim] = [s for s in spawns if ".watcher-" in s.child_agent_id]
        assert not has_ended(ledger, victim.child_run_id)
        (watcher / "scripts" / "slowsearch.json").write_text(json.dumps(child_script(0.0)))
        killed = await directory.handle(victim.child_agent_id).pid.remote()
        os.kill(killed, signal.SIGKILL)
        while not ledger.load_run(uuid.UUID(run_id)).state.ended:  # what owlclaw run does
            assert time.monotonic() < deadline + PATIENCE_S, "the parent's run did not end"
            await watch_subagents(ledger, directory, ["rayboss"])
            await asyncio.sleep(0.5)
        events = ledger.stream(ledger.load_agent(victim.child_agent_id).run_ids()[0])
        assert len([e for e in events if isinstance(e, ev.RunEnded)]) == 1
        return run_id

    try:
        run_id = asyncio.run(go())
    finally:
        for child in {s.child_agent_id for s in ledger.load_agent("rayboss").state.spawns.values()}:
            directory.handle(child)  # the parent's actor started it: this directory stops it
        asyncio.run(directory.close())
    events = ledger.stream(uuid.UUID(run_id))
    end = ended(ledger, run_id)
    assert isinstance(end, ev.RunCompleted) and end.answer == "summed up"
    answers = sorted(e.result["answer"] for e in events if isinstance(e, ev.ToolCallSucceeded))
    assert answers == sorted(f"{t}: done" for t in TASKS)
    assert end.tokens == 2 * 120 + 3 * 1050
    env = {**os.environ, "OWLCLAW_DATABASE_URL": fresh_db.url}
    env["OWLCLAW_DATABASE_NAME"] = str(fresh_db.params["dbname"])
    shown = owlclaw(env, "ledger", "rayboss", cwd=tmp_path).stdout
    assert "sub-agents of rayboss" in shown and shown.count("[completed]") == 3


class LosesReports:
    """A host's ``Agents``, except that sub-agents' reports never arrive (as when the child's
    host dies between the child's end and its report)."""

    def __init__(self) -> None:
        self.host: AgentHost | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    async def ask(self, message: Message[Any]) -> Any:
        if isinstance(message, SubAgentFinished):
            return None
        assert self.host is not None
        return await self.host.ask(message)


def test_a_report_that_never_arrived_is_reconciled_when_the_parent_is_activated(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = spawning_app(tmp_path, "forgotten")
    config = OwlClawConfig(runtime=RuntimeConfig(models=("x",)))

    async def go() -> str:
        lossy = LosesReports()
        first = lossy.host = AgentHost(ledger, config, agents=lossy)
        try:
            ledger.attach_app("forgotten", str(root))
            run_id = await first.ask(Submit(agent_id="forgotten", trigger="webhook"))
            deadline = time.monotonic() + PATIENCE_S
            while True:
                spawns = ledger.load_agent("forgotten").state.spawns.values()
                if len(spawns) == 3 and all(has_ended(ledger, s.child_run_id) for s in spawns):
                    break
                assert time.monotonic() < deadline, "the children did not end"
                await asyncio.sleep(0.1)
            assert ledger.load_run(uuid.UUID(run_id)).state.status == "parked"
        finally:
            await first.close()
        second = AgentHost(ledger, config)
        try:
            await second.ask(
                Activate(agent_id="forgotten")
            )  # reconciles from the ledger, resumes the run
            await asyncio.to_thread(ended, ledger, run_id)
        finally:
            await second.close()
        return run_id

    run_id = asyncio.run(go())
    end = ended(ledger, run_id)
    assert isinstance(end, ev.RunCompleted) and end.tokens == 2 * 120 + 3 * 1050
