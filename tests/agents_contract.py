"""The ``Agents`` contract, one suite for every implementation: a test module imports its tests
and gives them a ``setting`` fixture. ``tests/integration/test_agents_local_and_ray.py`` holds the
in-process mailbox host (``local``) and the Ray directory of host actors (``ray``, shared
placement, one host actor) to it, ``tests/unit/test_agents_in_memory.py`` the host on the
in-memory ledger.

Like eventsourcing's recorder suites, every test here runs against each implementation: FIFO order
of runs and fires, one end event per run, resume after a crash, fencing against a second writer,
cancel and status during a run, passivation and reactivation, idempotent triggers, a batch of
parallel calls around a barrier, and accepting
a trigger while another agent on the same host waits on a long tool call or blocks in a sync
one until its timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from events import Agent, Ledger, UnknownAgent
from events import catalog as ev
from events.agent_state import ApprovalClosed, UnknownSchedule, UnknownTools
from events.run import Run
from events.streams import run_stream_id
from owlclaw.agents import Agents
from owlclaw.config import OwlClawConfig
from owlclaw.messages import (
    Activate,
    AnswerApproval,
    Cancel,
    CancelSchedule,
    ChangeTools,
    Decision,
    ExpireApprovals,
    Fire,
    FireOutcome,
    Receive,
    Result,
    Submit,
    ToolsChange,
)
from owlclaw.reports.approvals import pending
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.approvals import ToolArgumentsInvalid, overdue
from owlclaw.tools.governance import OPERATOR_DISABLED
from tests.apps import make_app

T = TypeVar("T")
DECIDE = {"name": "log_decision", "arguments": {"reasoning": "ok", "decision_type": "other"}}
SCRIPTS: dict[str, Any] = {
    "answer": {"steps": [{"content": "done"}]},
    "one_tool": {"steps": [{"tool_calls": [DECIDE]}]},
    "paced": {
        "steps": [
            {"tool_calls": [DECIDE]},
            {
                "tool_calls": [
                    {"name": "schedule_once", "arguments": {"delay_seconds": 60, "focus": "x"}}
                ]
            },
            {"content": "scheduled"},
        ],
        "latency_s": 0.7,
    },
    "held": {
        "steps": [
            {"tool_calls": [{"name": "hold", "arguments": {}}]},
            {
                "tool_calls": [
                    {"name": "schedule_once", "arguments": {"delay_seconds": 60, "focus": "x"}}
                ]
            },
            {"content": "scheduled"},
        ],
    },
    "resume": {"steps": [{"tool_calls": [DECIDE]}, {"content": "recovered"}]},
    "batch": {
        "steps": [
            {
                "tool_calls": [
                    {"name": "lookup", "arguments": {"symbol": "A"}},
                    {"name": "lookup", "arguments": {"symbol": "B"}},
                    DECIDE,
                    {"name": "lookup", "arguments": {"symbol": "C"}},
                ]
            },
            {"content": "looked up"},
        ]
    },
    "wait_outside": {"steps": [{"tool_calls": [{"name": "wait_outside", "arguments": {}}]}]},
    "block_outside": {
        "steps": [
            {"tool_calls": [{"name": "block_outside", "arguments": {}}]},
            {"content": "gave up waiting"},
        ]
    },
}
HELD_HANDLERS = """
import asyncio
from pathlib import Path

from owlclaw import Registry

registry = Registry()


@registry.capability("Wait for the market to open.")
async def hold() -> dict[str, bool]:
    while not Path({released!r}).exists():  # the run goes on when the test says so
        await asyncio.sleep(0.05)
    return {{"open": True}}
"""

SLOW_HANDLERS = """
import asyncio
from pathlib import Path

from owlclaw import Registry

registry = Registry()


@registry.capability("Wait on a slow outside system.")
async def wait_outside() -> dict[str, bool]:
    while not Path({answered!r}).exists():  # the outside system answers when the test says so
        await asyncio.sleep(0.05)
    return {{"answered": True}}
"""

BATCH_HANDLERS = """
import asyncio
from pathlib import Path

from owlclaw import Registry

registry = Registry()


@registry.capability("Look a symbol up.", parallel_safe=True)
async def lookup(symbol: str) -> dict[str, object]:
    here = Path({meet!r})
    (here / symbol).touch()
    met = set()
    for _ in range(600):  # it notes which calls of its batch started while it ran
        met = {{p.name for p in here.iterdir()}}
        if symbol in "AB" and {{"A", "B"}} <= met or symbol == "C":
            break
        await asyncio.sleep(0.05)
    return {{"symbol": symbol, "met": sorted(met)}}
"""

BLOCKING_HANDLERS = """
import time
from pathlib import Path

from owlclaw import Registry

registry = Registry()


@registry.capability("Call a slow outside system with a blocking client.", timeout_s=4)
def block_outside() -> dict[str, bool]:
    deadline = time.monotonic() + 120
    while not Path({answered!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # blocks its thread until the test lets it answer
    Path({returned!r}).touch()
    return {{"answered": True}}
"""


def settled(ledger: Ledger, run_id: str) -> Callable[[], bool]:
    """A condition: the run has recorded an outcome of a tool call (or ended)."""
    outcomes = ev.ToolCallSucceeded | ev.ToolCallFailed | ev.ToolCallTimedOut | ev.RunEnded
    return lambda: any(isinstance(e, outcomes) for e in ledger.stream(uuid.UUID(run_id)))


@dataclass
class Setting:
    """One implementation under test: ``make(idle_s)`` gives the ``Agents`` (call it inside the
    test's event loop); ``register`` makes an agent whose app plays ``scripted/<script>``, so
    one host serves every test."""

    name: str
    ledger: Ledger
    config: OwlClawConfig
    make: Callable[[float | None], Agents]
    apps: Path

    def register(self, agent_id: str, script: str) -> Agent:
        model = f'[agent]\nmodels = ["scripted/{script}"]\n'
        root = make_app(self.apps / agent_id, config=model)
        return self.ledger.register_agent(agent_id, str(root))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def hosted(setting: Setting, scenario: Callable[[Agents], Awaitable[T]], idle_s: float = 300) -> T:
    """Run ``scenario`` against the setting's Agents; always closed afterwards."""

    async def main() -> T:
        agents = setting.make(idle_s)
        try:
            return await scenario(agents)
        finally:
            await agents.close()

    return asyncio.run(main())


async def until(condition: Callable[[], Any], timeout: float = 30.0) -> None:
    """Poll ``condition`` (ledger or status reads) until it holds; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:g} s")
        await asyncio.sleep(0.02)


def recorded(ledger: Ledger, run_id: str, kind: type[ev.LedgerEvent]) -> Callable[[], bool]:
    """A condition for ``until``: the run has recorded an event of ``kind``."""
    return lambda: any(isinstance(e, kind) for e in ledger.stream(uuid.UUID(run_id)))


def runs(ledger: Ledger, agent_id: str) -> list[list[ev.LedgerEvent]]:
    return [ledger.stream(r) for r in ledger.list_runs(agent_id)]


def assert_one_end_each_and_contiguous(ledger: Ledger, agent_id: str) -> None:
    for events in runs(ledger, agent_id):
        versions = [e.originator_version for e in events]
        assert versions == list(range(1, len(versions) + 1))
        ends = [e for e in events if isinstance(e, ev.TERMINAL_RUN_EVENTS)]
        assert len(ends) <= 1 and (not ends or ends[0] is events[-1])


def schedule(ledger: Ledger, agent_id: str, schedule_id: str, at: datetime) -> None:
    agent = ledger.load_agent(agent_id)
    agent.record(
        ev.ScheduleRequested,
        schedule_id=schedule_id,
        kind="once",
        focus=f"fire {schedule_id}",
        agent_id=agent_id,
        delay_seconds=60,
        fire_at=at,
    )
    ledger.append(agent)


# --- the contract ---------------------------------------------------------------------------


def test_runs_and_fires_of_one_agent_execute_one_at_a_time_in_acceptance_order(
    setting: Setting,
) -> None:
    ledger, agent_id = setting.ledger, unique("fifo")
    setting.register(agent_id, "one_tool")
    at = datetime.now(UTC) + timedelta(minutes=1)
    schedule(ledger, agent_id, "sch-fifo", at)

    async def scenario(agents: Agents) -> tuple[list[str], FireOutcome]:
        first = [
            agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus=f"n{i}"))
            for i in range(10)
        ]
        accepted = list(await asyncio.gather(*first))
        outcome = await agents.ask(Fire(agent_id=agent_id, schedule_id="sch-fifo", fire_time=at))
        assert outcome.run_id is not None
        accepted.append(outcome.run_id)
        accepted += [
            await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus=f"m{i}"))
            for i in range(5)
        ]
        results = await asyncio.gather(
            *(agents.ask(Result(agent_id=agent_id, run_id=r)) for r in accepted)
        )
        assert [r.status for r in results] == ["completed"] * len(accepted)
        return accepted, outcome

    accepted, outcome = hosted(setting, scenario)
    assert outcome.kind == "fire" and outcome.reason == ""
    streams = runs(ledger, agent_id)  # in run number order, i.e. acceptance order
    assert {str(s[0].originator_id) for s in streams} == set(accepted)
    [fired] = [s[0] for s in streams if str(s[0].originator_id) == outcome.run_id]
    assert isinstance(fired, ev.RunStarted) and fired.trigger == "schedule_once"
    assert fired.context["schedule_id"] == "sch-fifo"
    at_position = {
        (logged.event.originator_id, logged.event.originator_version): logged.position
        for logged in ledger.agent_history(agent_id)
    }
    spans = [
        (
            at_position[(s[0].originator_id, 1)],
            at_position[(s[-1].originator_id, s[-1].originator_version)],
        )
        for s in streams
    ]
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert ended < started  # one at a time, in acceptance order
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_a_second_delivery_of_a_fire_is_a_duplicate_and_starts_no_run(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("dup")
    setting.register(agent_id, "answer")
    at = datetime.now(UTC) + timedelta(minutes=1)
    schedule(ledger, agent_id, "sch-dup", at)

    async def scenario(agents: Agents) -> list[FireOutcome]:
        fire = Fire(agent_id=agent_id, schedule_id="sch-dup", fire_time=at)
        first, second = await agents.ask(fire), await agents.ask(fire)
        assert first.run_id is not None
        await agents.ask(Result(agent_id=agent_id, run_id=first.run_id))
        return [first, second]

    first, second = hosted(setting, scenario)
    assert isinstance(first, FireOutcome) and isinstance(second, FireOutcome)
    assert (second.kind, second.run_id) == ("duplicate", None)
    assert len(ledger.list_runs(agent_id)) == 1


def assert_plain(error: Exception, kind: type[Exception]) -> None:
    """A domain error reaches the caller as itself on every placement: its own type, its own
    one-line message (Ray wraps an actor's error with the actor's traceback)."""
    assert type(error) is kind
    assert "\n" not in str(error) and "ray::" not in str(error)


def test_an_unknown_agent_is_a_clear_error(setting: Setting) -> None:
    async def scenario(agents: Agents) -> None:
        with pytest.raises(UnknownAgent, match="nobody-here") as caught:
            await agents.ask(Submit(agent_id="nobody-here", trigger="webhook"))
        assert_plain(caught.value, UnknownAgent)

    hosted(setting, scenario)


def test_a_retried_trigger_with_the_same_idempotency_key_gets_the_same_run(
    setting: Setting,
) -> None:
    ledger, agent_id = setting.ledger, unique("idem")
    setting.register(agent_id, "answer")

    async def scenario(agents: Agents) -> tuple[str, str, str]:
        first = await agents.ask(
            Submit(agent_id=agent_id, trigger="webhook", focus="once", idempotency_key="k-1")
        )
        again = await agents.ask(
            Submit(agent_id=agent_id, trigger="webhook", focus="once", idempotency_key="k-1")
        )
        other = await agents.ask(
            Submit(agent_id=agent_id, trigger="webhook", focus="twice", idempotency_key="k-2")
        )
        await agents.ask(Result(agent_id=agent_id, run_id=other))
        return first, again, other

    first, again, other = hosted(setting, scenario)
    assert first == again != other
    queued = [
        e for e in ledger.stream(ledger.load_agent(agent_id).id) if isinstance(e, ev.RunQueued)
    ]
    assert [(q.idempotency_key, str(q.run_id)) for q in queued] == [("k-1", first), ("k-2", other)]


def test_an_interrupted_run_resumes_first_then_runs_accepted_before_the_crash(
    setting: Setting,
) -> None:
    """What a host leaves behind when its process dies mid-run: run 1 with a committed model
    response and tool request but no outcome, runs 2 and 3 accepted but never started."""
    ledger, agent_id = setting.ledger, unique("crash")
    agent = setting.register(agent_id, "resume")
    queued = agent.queue_run("webhook", focus="interrupted")
    run = Run.start(agent_id, queued)
    run.record(ev.VisibleToolsResolved, tools=["log_decision"])
    call = {"id": "c1", "type": "function", "function": {"name": "log_decision", "arguments": "{}"}}
    run.record(
        ev.LLMResponded,
        model="scripted/resume",
        message={"role": "assistant", "content": None, "tool_calls": [call]},
        usage={"total_tokens": 10},
    )
    run.record(
        ev.ToolCallRequested, call_id="c1", tool="log_decision", arguments=DECIDE["arguments"]
    )
    later = [agent.queue_run("webhook", focus=f"later {i}") for i in range(2)]
    ledger.append(agent, run)

    async def scenario(agents: Agents) -> list[str]:
        run_ids = [str(queued.run_id), *(str(q.run_id) for q in later)]
        return [(await agents.ask(Result(agent_id=agent_id, run_id=r))).status for r in run_ids]

    assert hosted(setting, scenario) == ["completed"] * 3
    first = [type(e).__name__ for e in ledger.stream(queued.run_id)]
    assert "RunResumed" in first and first.count("LLMResponded") == 2  # recorded one not re-asked
    assert first.count("DecisionLogged") == 1  # the lost effect happened exactly once
    streams = runs(ledger, agent_id)
    began = {
        logged.event.originator_id: logged.position  # the last one: run 1's RunResumed
        for logged in ledger.agent_history(agent_id)
        if isinstance(logged.event, ev.RunResumed | ev.RunStarted)
    }
    assert began[queued.run_id] < began[later[0].run_id] < began[later[1].run_id]
    assert len(streams) == 3
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_a_second_writer_fences_the_host_and_the_streams_never_fork(setting: Setting) -> None:
    """While the host runs run 1, another writer queues run 2 on the agent's stream: the host's
    next commit that touches the agent loses, run 1 ends at its last good commit, and run 2
    is executed once the host next activates the agent. Run 1 waits in a tool call until the
    other writer has queued run 2 (not for a model's latency that a slow machine could outlast):
    its schedule_once comes after."""
    ledger, agent_id = setting.ledger, unique("fenced")
    released = setting.apps / agent_id / "released"
    app = make_app(setting.apps / agent_id, config='[agent]\nmodels = ["scripted/held"]\n')
    (app / "handlers.py").write_text(HELD_HANDLERS.format(released=str(released)))
    ledger.register_agent(agent_id, str(app))
    intruder = AgentRuntime(ledger, agent_id, models=["scripted/answer"])

    async def scenario(agents: Agents) -> tuple[str, str, str]:
        first = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="first"))
        try:
            await until(recorded(ledger, first, ev.ToolCallRequested))
            second, _ = await intruder.inbox.submit(
                Submit(agent_id=agent_id, trigger="webhook", focus="from another writer")
            )
        finally:
            released.touch()
        assert (await agents.ask(Result(agent_id=agent_id, run_id=first))).status == "failed"
        return (
            first,
            str(second),
            (await agents.ask(Result(agent_id=agent_id, run_id=str(second)))).status,
        )

    first, second, second_status = hosted(setting, scenario)
    intruder.close()
    events = ledger.stream(uuid.UUID(first))
    [ended] = [e for e in events if isinstance(e, ev.TERMINAL_RUN_EVENTS)]
    assert isinstance(ended, ev.RunFailed) and "another host took over" in ended.error
    agent_events = ledger.stream(ledger.load_agent(agent_id).id)
    owners = [e.owner_run_id for e in agent_events if isinstance(e, ev.ScheduleRequested)]
    assert uuid.UUID(first) not in owners  # run 1's lost commit is not in the ledger
    assert [e.run_no for e in agent_events if isinstance(e, ev.RunQueued)] == [1, 2]
    assert second == str(run_stream_id(agent_id, 2)) and second_status == "completed"
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_what_the_host_accepts_during_a_run_queues_behind_it_and_breaks_nothing(
    setting: Setting,
) -> None:
    """A trigger, a fire and an inbound event the host itself accepts while the agent's run is
    between its steps are facts of the same writer: the run's next commit to the agent's stream
    (its schedule_once) rebases over them instead of taking them for a second host."""
    ledger, agent_id = setting.ledger, unique("busy")
    setting.register(agent_id, "paced")
    at = datetime.now(UTC) + timedelta(minutes=1)
    schedule(ledger, agent_id, "sch-busy", at)

    async def scenario(agents: Agents) -> list[str]:
        first = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="first"))
        await until(recorded(ledger, first, ev.DecisionLogged))
        second = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="second"))
        fired = await agents.ask(Fire(agent_id=agent_id, schedule_id="sch-busy", fire_time=at))
        await agents.ask(Receive(agent_id=agent_id, source="mail", payload={"subject": "hello"}))
        assert fired.run_id is not None
        accepted = [first, second, fired.run_id]
        results = [await agents.ask(Result(agent_id=agent_id, run_id=r)) for r in accepted]
        assert [r.status for r in results] == ["completed"] * 3
        return accepted

    accepted = hosted(setting, scenario)
    agent_events = ledger.stream(ledger.load_agent(agent_id).id)
    owners = [
        str(e.owner_run_id)
        for e in agent_events
        if isinstance(e, ev.ScheduleRequested) and e.owner_run_id is not None
    ]
    assert owners == accepted  # each run's schedule_once committed, none lost
    assert [e.run_no for e in agent_events if isinstance(e, ev.RunQueued)] == [1, 2, 3]
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_status_answers_during_a_run_and_cancel_ends_it_while_the_mailbox_goes_on(
    setting: Setting,
) -> None:
    """The first run waits in a tool call until the test has cancelled it (the next one then
    finds the call answered at once): it is still running when cancelled, on any machine."""
    ledger, agent_id = setting.ledger, unique("cancel")
    released = setting.apps / agent_id / "released"
    app = make_app(setting.apps / agent_id, config='[agent]\nmodels = ["scripted/held"]\n')
    (app / "handlers.py").write_text(HELD_HANDLERS.format(released=str(released)))
    ledger.register_agent(agent_id, str(app))

    async def scenario(agents: Agents) -> tuple[bool, str, str]:
        slow = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="slow"))
        after = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="next"))
        try:
            await until(recorded(ledger, slow, ev.ToolCallRequested))  # inside its tool call
            activity = (await agents.status(agent_id)).agents[agent_id]
            assert activity.running == slow and activity.queued == 1  # the next waits behind
            cancelled = await agents.ask(Cancel(agent_id=agent_id, run_id=slow))
        finally:
            released.touch()
        first, second = (
            await agents.ask(Result(agent_id=agent_id, run_id=slow)),
            await agents.ask(Result(agent_id=agent_id, run_id=after)),
        )
        return cancelled, first.status, second.status

    cancelled, first, second = hosted(setting, scenario)
    assert cancelled and (first, second) == ("terminated", "completed")
    [ended] = [e for e in runs(ledger, agent_id)[0] if isinstance(e, ev.TERMINAL_RUN_EVENTS)]
    assert isinstance(ended, ev.RunTerminated) and ended.reason == "cancelled"
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("sleepy")
    setting.register(agent_id, "answer")

    async def scenario(agents: Agents) -> tuple[int, int, str]:
        await agents.ask(
            Result(
                agent_id=agent_id,
                run_id=await agents.ask(Submit(agent_id=agent_id, trigger="webhook")),
            )
        )
        deadline = time.monotonic() + 30
        while agent_id in (await agents.status(agent_id)).agents:
            assert time.monotonic() < deadline, "never passivated"
            await asyncio.sleep(0.05)
        before = await agents.status(agent_id)
        run_id = await agents.ask(Submit(agent_id=agent_id, trigger="webhook"))
        # Counted before the result: the run may end and the agent passivate again before a
        # result call reaches a Ray host, which then answers it from the ledger (an activation)
        after = await agents.status(agent_id)
        result = await agents.ask(Result(agent_id=agent_id, run_id=run_id))
        return before.passivations, after.activations - before.activations, result.status

    passivations, reactivations, status = hosted(setting, scenario, idle_s=0.3)
    assert passivations >= 1 and reactivations == 1 and status == "completed"
    assert [s[0].run_no for s in runs(ledger, agent_id)] == [1, 2]  # type: ignore[attr-defined]


def test_a_trigger_is_accepted_at_once_while_another_agent_of_the_host_waits_on_a_tool(
    setting: Setting,
) -> None:
    """The busy agent's tool waits until the test answers it, which it does only once the free
    agent's trigger was accepted (twice: the retry) and its run completed: accepting does not
    wait for another agent's tool call, however slow the machine."""
    ledger = setting.ledger
    busy, free = unique("busy"), unique("free")
    answered = setting.apps / busy / "answered"
    app = make_app(setting.apps / busy, config='[agent]\nmodels = ["scripted/wait_outside"]\n')
    (app / "handlers.py").write_text(SLOW_HANDLERS.format(answered=str(answered)))
    ledger.register_agent(busy, str(app))
    setting.register(free, "answer")

    async def scenario(agents: Agents) -> tuple[bool, str, str, int]:
        await agents.ask(Activate(agent_id=busy))
        await agents.ask(Activate(agent_id=free))
        waiting = await agents.ask(Submit(agent_id=busy, trigger="webhook"))
        try:
            await until(recorded(ledger, waiting, ev.ToolCallRequested))
            accepted = await agents.ask(
                Submit(agent_id=free, trigger="webhook", idempotency_key="retry-me")
            )
            retried = await agents.ask(
                Submit(agent_id=free, trigger="webhook", idempotency_key="retry-me")
            )
            done = await agents.ask(Result(agent_id=free, run_id=accepted))
            still_waiting = not await asyncio.to_thread(settled(ledger, waiting))
        finally:
            answered.touch()
        slow = await agents.ask(Result(agent_id=busy, run_id=waiting))
        assert slow.status == "completed" and slow.tools_called == ["wait_outside"]
        queued = [
            e for e in ledger.stream(ledger.load_agent(free).id) if isinstance(e, ev.RunQueued)
        ]
        assert retried == accepted
        return still_waiting, done.status, slow.status, len(queued)

    still_waiting, free_status, busy_status, free_queued = hosted(setting, scenario)
    assert still_waiting, "the free agent's trigger waited for the busy agent's tool call"
    assert (free_status, busy_status, free_queued) == ("completed", "completed", 1)


def test_a_blocking_sync_tool_times_out_while_another_agent_of_the_host_completes_runs(
    setting: Setting,
) -> None:
    """A sync capability blocks its thread until the test lets it answer (its timeout is 4 s):
    the host's event loop goes on, another agent's runs end while it still blocks, the call
    records ToolCallTimedOut and the blocked agent's run goes on with the model. It is let go
    only after its timeout was recorded, so no step depends on the speed of the machine."""
    ledger = setting.ledger
    blocked, free = unique("blocked"), unique("free")
    answered, returned = setting.apps / blocked / "answered", setting.apps / blocked / "returned"
    app = make_app(setting.apps / blocked, config='[agent]\nmodels = ["scripted/block_outside"]\n')
    handlers = BLOCKING_HANDLERS.format(answered=str(answered), returned=str(returned))
    (app / "handlers.py").write_text(handlers)
    ledger.register_agent(blocked, str(app))
    setting.register(free, "answer")

    async def scenario(agents: Agents) -> tuple[list[str], bool, str]:
        await agents.ask(Activate(agent_id=blocked))
        await agents.ask(Activate(agent_id=free))
        waiting = await agents.ask(Submit(agent_id=blocked, trigger="webhook"))
        try:
            await until(recorded(ledger, waiting, ev.ToolCallRequested))
            statuses = []
            for _ in range(2):
                accepted = await agents.ask(Submit(agent_id=free, trigger="webhook"))
                statuses.append((await agents.ask(Result(agent_id=free, run_id=accepted))).status)
            still_blocked = not returned.exists()  # the free agent did not wait for it
            await until(recorded(ledger, waiting, ev.ToolCallTimedOut))
        finally:
            answered.touch()
        return (
            statuses,
            still_blocked,
            (await agents.ask(Result(agent_id=blocked, run_id=waiting))).status,
        )

    statuses, still_blocked, blocked_status = hosted(setting, scenario)
    assert still_blocked, "the free agent waited for the blocked one"
    assert statuses == ["completed", "completed"] and blocked_status == "completed"
    [run_id] = ledger.list_runs(blocked)
    [timeout] = [e for e in ledger.stream(run_id) if isinstance(e, ev.ToolCallTimedOut)]
    assert timeout.tool == "block_outside" and timeout.timeout_s == 4


def test_a_heartbeat_acts_only_on_what_the_agent_received(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("inbound")
    setting.register(agent_id, "one_tool")

    async def scenario(agents: Agents) -> tuple[str, int, str]:
        idle = await agents.ask(
            Result(
                agent_id=agent_id,
                run_id=await agents.ask(Submit(agent_id=agent_id, trigger="heartbeat")),
            )
        )
        position = await agents.ask(
            Receive(agent_id=agent_id, source="webhook", payload={"order": 7})
        )
        acting = await agents.ask(
            Result(
                agent_id=agent_id,
                run_id=await agents.ask(Submit(agent_id=agent_id, trigger="heartbeat")),
            )
        )
        return idle.status, position, acting.status

    idle, position, acting = hosted(setting, scenario)
    assert (idle, acting) == ("skipped", "completed")
    [received] = [
        logged
        for logged in ledger.agent_history(agent_id)
        if isinstance(logged.event, ev.InboundReceived)
    ]
    assert isinstance(received.event, ev.InboundReceived)
    assert received.position == position and received.event.payload == {"order": 7}
    skipped, acted = runs(ledger, agent_id)
    assert not any(isinstance(e, ev.LLMResponded) for e in skipped)
    assert any(isinstance(e, ev.DecisionLogged) for e in acted)


def test_tools_are_switched_through_the_agents_writer(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("switched")
    setting.register(agent_id, "one_tool")

    async def scenario(agents: Agents) -> ToolsChange:
        change = await agents.ask(
            ChangeTools(agent_id=agent_id, enable=[], disable=["log_decision"], by="test")
        )
        with pytest.raises(UnknownTools, match="has no tool 'nope'") as caught:
            await agents.ask(ChangeTools(agent_id=agent_id, enable=["nope"], disable=[], by="test"))
        assert_plain(caught.value, UnknownTools)
        await agents.ask(
            Result(
                agent_id=agent_id,
                run_id=await agents.ask(Submit(agent_id=agent_id, trigger="webhook")),
            )
        )
        return change

    change = hosted(setting, scenario)
    assert change.disabled == ["log_decision"] and change.position is not None
    [run] = runs(ledger, agent_id)
    [visible] = [e for e in run if isinstance(e, ev.VisibleToolsResolved)]
    assert visible.filtered == {"log_decision": OPERATOR_DISABLED}
    [denied] = [e for e in run if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason == OPERATOR_DISABLED
    changes = [
        e for e in ledger.stream(ledger.load_agent(agent_id).id) if isinstance(e, ev.ToolsChanged)
    ]
    assert [(c.disabled, c.by) for c in changes] == [(["log_decision"], "test")]  # not 'nope'


def test_a_schedule_is_cancelled_through_the_agents_writer_during_a_run(setting: Setting) -> None:
    """An operator's cancel while a run is between steps: recorded with who did it, and the
    run's own later schedule_once rebases over it."""
    ledger, agent_id = setting.ledger, unique("cancelling")
    setting.register(agent_id, "paced")
    schedule(ledger, agent_id, "sch-old", datetime.now(UTC) + timedelta(minutes=5))

    async def scenario(agents: Agents) -> int:
        run_id = await agents.ask(Submit(agent_id=agent_id, trigger="webhook"))
        await until(recorded(ledger, run_id, ev.DecisionLogged))
        position = await agents.ask(
            CancelSchedule(
                agent_id=agent_id, schedule_id="sch-old", by="console:ops", reason="obsolete"
            )
        )
        with pytest.raises(UnknownSchedule, match="no active schedule 'sch-old'") as caught:
            await agents.ask(
                CancelSchedule(agent_id=agent_id, schedule_id="sch-old", by="console:ops")
            )
        assert_plain(caught.value, UnknownSchedule)
        assert (await agents.ask(Result(agent_id=agent_id, run_id=run_id))).status == "completed"
        return position

    position = hosted(setting, scenario)
    agent = ledger.load_agent(agent_id)
    [cancelled] = [e for e in ledger.stream(agent.id) if isinstance(e, ev.ScheduleCancelled)]
    assert (cancelled.schedule_id, cancelled.by, cancelled.reason) == (
        "sch-old",
        "console:ops",
        "obsolete",
    )
    assert ledger.log.read(after=position - 1, limit=1)[0].event == cancelled
    [(_, remaining)] = agent.state.schedules.items()  # the run's own schedule, committed after
    assert remaining.owner_run_id is not None
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_parked_runs_wait_for_their_answers_while_the_mailbox_goes_on(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("approvals")
    config = '[agent]\nmodels = ["scripted/one_tool"]\n\n[governance]\nask = ["log_*"]\n'
    ledger.register_agent(agent_id, str(make_app(setting.apps / agent_id, config=config)))

    async def scenario(agents: Agents) -> list[str]:
        first = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="first"))
        second = await agents.ask(
            Submit(agent_id=agent_id, trigger="webhook", focus="second")
        )  # not blocked
        parked = [
            (await agents.ask(Result(agent_id=agent_id, run_id=r))).status for r in (first, second)
        ]
        waiting = {a.run_id: a.approval_id for a in pending(ledger, [agent_id])}
        digests = {a.approval_id: a.digest for a in pending(ledger, [agent_id])}
        ok = Decision(waiting[first], True, "ops", digest=digests[waiting[first]])
        yes = await agents.ask(AnswerApproval(agent_id=agent_id, decision=ok))
        edit = Decision(
            waiting[second],
            True,
            "ops",
            arguments={"reasoning": ""},
            digest=digests[waiting[second]],
        )
        with pytest.raises(ToolArgumentsInvalid, match="edited arguments of log_decision") as bad:
            await agents.ask(AnswerApproval(agent_id=agent_id, decision=edit))
        assert_plain(bad.value, ToolArgumentsInvalid)
        no = await agents.ask(
            AnswerApproval(
                agent_id=agent_id,
                decision=Decision(
                    waiting[second], False, "ops", "not now", digest=digests[waiting[second]]
                ),
            )
        )
        with pytest.raises(ApprovalClosed, match="already granted") as closed:
            await agents.ask(
                AnswerApproval(agent_id=agent_id, decision=Decision(waiting[first], False, "ops"))
            )
        assert_plain(closed.value, ApprovalClosed)
        await until(recorded(ledger, no.run_id, ev.RunCompleted))
        await until(recorded(ledger, yes.run_id, ev.RunCompleted))
        return parked

    assert hosted(setting, scenario) == ["parked", "parked"]
    first, second = runs(ledger, agent_id)
    assert [type(e).__name__ for e in first].count("DecisionLogged") == 1
    [denied] = [e for e in second if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason == "denied by ops: not now"
    assert not [e for e in second if isinstance(e, ev.DecisionLogged)]
    assert_one_end_each_and_contiguous(ledger, agent_id)


def test_an_overdue_approval_expires_through_the_agents_writer(setting: Setting) -> None:
    ledger, agent_id = setting.ledger, unique("expiring")
    config = (
        '[agent]\nmodels = ["scripted/one_tool"]\n\n'
        '[governance]\nask = ["log_decision"]\napproval_timeout_s = 0.2\n'
    )
    ledger.register_agent(agent_id, str(make_app(setting.apps / agent_id, config=config)))

    async def scenario(agents: Agents) -> int:
        run_id = await agents.ask(Submit(agent_id=agent_id, trigger="webhook"))
        assert (await agents.ask(Result(agent_id=agent_id, run_id=run_id))).status == "parked"
        await until(lambda: overdue(ledger, [agent_id]) == [agent_id])
        expired = await agents.ask(ExpireApprovals(agent_id=agent_id))
        await until(recorded(ledger, run_id, ev.RunCompleted))
        return expired

    assert hosted(setting, scenario) == 1
    [run] = runs(ledger, agent_id)
    [denied] = [e for e in run if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason.startswith("nobody approved the call before")
    kinds = [type(e).__name__ for e in ledger.stream(ledger.load_agent(agent_id).id)]
    assert kinds.count("ApprovalExpired") == 1


def test_a_batch_runs_parallel_calls_side_by_side_around_a_barrier(setting: Setting) -> None:
    """One response: lookup A, lookup B (parallel_safe), log_decision (a barrier), lookup C.
    A and B run side by side (each waits until both started: a test that fails rather than
    hangs if they do not), C starts after the barrier; every request is committed before the
    first outcome, each call settles once, and the run completes."""
    ledger, agent_id = setting.ledger, unique("batch")
    meet = setting.apps / agent_id / "meet"
    app = make_app(setting.apps / agent_id, config='[agent]\nmodels = ["scripted/batch"]\n')
    meet.mkdir()
    (app / "handlers.py").write_text(BATCH_HANDLERS.format(meet=str(meet)))
    ledger.register_agent(agent_id, str(app))

    async def scenario(agents: Agents) -> str:
        run_id = await agents.ask(Submit(agent_id=agent_id, trigger="webhook", focus="batch"))
        result = await agents.ask(Result(agent_id=agent_id, run_id=run_id))
        assert result.status == "completed"
        return run_id

    events = ledger.stream(uuid.UUID(hosted(setting, scenario)))
    kinds = [type(e) for e in events]
    requested = [i for i, k in enumerate(kinds) if k is ev.ToolCallRequested]
    settled = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert len(requested) == 4 and max(requested) < kinds.index(ev.ToolCallSucceeded)
    assert sorted(e.call_id for e in settled) == sorted({e.call_id for e in settled})
    met = {e.result["symbol"]: e.result["met"] for e in settled if e.tool == "lookup"}
    assert met == {"A": ["A", "B"], "B": ["A", "B"], "C": ["A", "B", "C"]}
    decided = [e for e in settled if e.tool == "log_decision"]
    assert len(decided) == 1
    c_started = next(
        i for i, e in enumerate(settled) if e.tool == "lookup" and e.result["symbol"] == "C"
    )
    assert settled.index(decided[0]) < c_started  # C ran after the barrier
    assert_one_end_each_and_contiguous(ledger, agent_id)
