"""The agent host without Ray: passivation and re-activation, queued runs surviving their host."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.capabilities import Registry
from owlclaw.runtime.loop import AgentRuntime
from tests.apps import make_app

pytestmark = pytest.mark.integration


TERMINAL = {cls.__name__ for cls in ev.TERMINAL_RUN_EVENTS}


def config() -> OwlClawConfig:
    register_script("host-answer", [{"content": "done"}])
    return config_with("scripted/host-answer")


def config_with(model: str) -> OwlClawConfig:
    return OwlClawConfig(runtime=RuntimeConfig(models=(model,)))


def test_an_idle_agent_is_passivated_and_reactivated_from_the_ledger(ledger: Ledger) -> None:
    ledger.register_agent("sleepy")

    async def scenario() -> tuple[dict[str, object], dict[str, object], str]:
        host = AgentHost(ledger, config(), idle_s=0.2)
        first = await host.submit("sleepy", "webhook")
        await host.result("sleepy", first)
        await asyncio.sleep(0.6)
        passivated = host.status()
        second = await host.submit("sleepy", "webhook")
        result = await host.result("sleepy", second)
        status = host.status()
        await host.close()
        return passivated, status, str(result["status"])

    passivated, status, second_status = asyncio.run(scenario())
    assert passivated["agents"] == {} and passivated["passivations"] == 1
    assert status["activations"] == 2 and second_status == "completed"
    assert [ledger.stream(r)[0].run_no for r in ledger.list_runs("sleepy")] == [1, 2]  # type: ignore[attr-defined]


def test_runs_accepted_by_a_host_that_died_run_when_the_agent_is_next_activated(
    ledger: Ledger,
) -> None:
    ledger.register_agent("orphaned")
    accepted = AgentRuntime(ledger, "orphaned", models=["scripted/host-answer"])
    register_script("host-answer", [{"content": "done"}])
    queued = [asyncio.run(accepted.submit("webhook", focus=f"q{i}")) for i in range(3)]
    accepted.close()  # the host dies here: RunQueued committed, nothing started

    async def next_host() -> list[dict[str, object]]:
        host = AgentHost(ledger, config())
        fourth = await host.submit("orphaned", "webhook", focus="q3")
        results = [await host.result("orphaned", str(q.run_id)) for q in queued]
        results.append(await host.result("orphaned", fourth))
        await host.close()
        return results

    results = asyncio.run(next_host())
    assert [r["status"] for r in results] == ["completed"] * 4
    starts = [ledger.stream(r)[0] for r in ledger.list_runs("orphaned")]
    assert [(s.run_no, s.focus) for s in starts if isinstance(s, ev.RunStarted)] == [
        (1, "q0"),
        (2, "q1"),
        (3, "q2"),
        (4, "q3"),
    ]
    assert uuid.UUID(str(results[0]["run_id"])) == queued[0].run_id


def interrupted_run(ledger: Ledger, agent_id: str, tool: str, arguments: dict[str, object]) -> str:
    """What a process leaves behind when it dies right after committing a tool request:
    the run's start, its first model response and the write-ahead ToolCallRequested."""
    agent = ledger.register_agent(agent_id)
    queued = ledger.enqueue_run(agent, "webhook", focus="interrupted")
    run = ledger.start_run(agent_id, queued)
    run.record(ev.VisibleToolsResolved, tools=["remember", "recall", "log_decision"])
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    run.record(
        ev.LLMResponded,
        model="scripted/resume",
        message={"role": "assistant", "content": None, "tool_calls": [call]},
        usage={"total_tokens": 120},
    )
    run.record(ev.ToolCallRequested, call_id="c1", tool=tool, arguments=arguments)
    ledger.append(agent, run)
    return str(queued.run_id)


@pytest.mark.parametrize(
    ("tool", "arguments", "effect"),
    [
        ("remember", {"content": "bought 10 AAPL", "tags": []}, "MemoryRemembered"),
        ("log_decision", {"reasoning": "wait", "decision_type": "no_action"}, "DecisionLogged"),
    ],
)
def test_an_interrupted_run_resumes_from_its_recorded_steps(
    ledger: Ledger, tool: str, arguments: dict[str, object], effect: str
) -> None:
    run_id = interrupted_run(ledger, "crashed", tool, arguments)
    register_script(
        "resume",
        [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {"content": "recovered"}],
    )

    async def activate() -> dict[str, object]:
        host = AgentHost(ledger, config_with("scripted/resume"))
        result = await host.result("crashed", run_id)  # activation resumes it first
        await host.close()
        return result

    result = asyncio.run(activate())
    kinds = [type(e).__name__ for e in ledger.stream(uuid.UUID(run_id))]
    assert result["status"] == "completed"
    assert kinds.count("LLMResponded") == 2  # the recorded response was not asked again
    assert kinds.count("ToolOutcomeUnknown") == 1 and "RunResumed" in kinds
    assert sum(k in TERMINAL for k in kinds) == 1
    # a built-in's effect is a ledger event committed with its outcome: it had not happened,
    # so the tool ran again, exactly once
    assert kinds.count(effect) == 1 and kinds.count("ToolCallSucceeded") == 1


def test_a_capability_with_an_unknown_outcome_is_not_repeated(ledger: Ledger) -> None:
    orders: list[str] = []
    registry = Registry()

    @registry.capability("Place an order (not idempotent).")
    def place_order(symbol: str) -> dict[str, object]:
        orders.append(symbol)
        return {"placed": symbol}

    run_id = interrupted_run(ledger, "trader", "place_order", {"symbol": "AAPL"})
    register_script(
        "resume",
        [{"tool_calls": [{"name": "place_order", "arguments": {"symbol": "AAPL"}}]}, {}],
    )
    runtime = AgentRuntime(ledger, "trader", models=["scripted/resume"], registry=registry)
    result = asyncio.run(runtime.resume(uuid.UUID(run_id)))
    runtime.close()
    events = ledger.stream(uuid.UUID(run_id))
    assert result.status == "completed" and orders == []  # never placed twice
    [unknown] = [e for e in events if isinstance(e, ev.ToolOutcomeUnknown)]
    assert unknown.tool == "place_order"


def test_an_agent_whose_app_directory_became_invalid_fails_its_runs_and_the_host_serves_on(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "app")
    ledger.register_agent("broken", str(root))
    ledger.register_agent("healthy")
    (root / "SOUL.md").unlink()

    async def scenario() -> list[dict[str, object]]:
        host = AgentHost(ledger, config())
        results = [await host.result("broken", await host.submit("broken", "webhook"))]
        results.append(await host.result("healthy", await host.submit("healthy", "webhook")))
        (root / "SOUL.md").write_text("# Soul\\nBack.\\n")
        results.append(await host.result("broken", await host.submit("broken", "webhook")))
        await host.close()
        return results

    failed, other, repaired = asyncio.run(scenario())
    assert (failed["status"], other["status"], repaired["status"]) == (
        "failed",
        "completed",
        "completed",
    )
    [first] = ledger.list_runs("broken")[:1]
    [error] = [e for e in ledger.stream(first) if isinstance(e, ev.RunFailed)]
    assert "SOUL.md not found" in error.error


def test_cancel_ends_the_running_run_and_the_mailbox_goes_on(ledger: Ledger) -> None:
    ledger.register_agent("cancelled")
    register_script("host-slow", {"steps": [], "latency_s": 1.5})

    async def scenario() -> tuple[bool, dict[str, object], dict[str, object]]:
        host = AgentHost(ledger, config_with("scripted/host-slow"))
        slow = await host.submit("cancelled", "webhook", focus="slow")
        await asyncio.sleep(0.5)
        status = host.status("cancelled")["agents"]["cancelled"]  # type: ignore[index]
        assert status["running"] == slow  # answers while the run is in flight
        cancelled = host.cancel("cancelled", slow)
        after = await host.submit("cancelled", "webhook", focus="next")
        results = (await host.result("cancelled", slow), await host.result("cancelled", after))
        await host.close()
        return cancelled, *results

    cancelled, first, second = asyncio.run(scenario())
    assert cancelled and first["status"] == "terminated" and second["status"] == "completed"
    first_run = ledger.stream(ledger.list_runs("cancelled")[0])
    [ended] = [e for e in first_run if type(e).__name__ in TERMINAL]
    assert isinstance(ended, ev.RunTerminated) and ended.reason == "cancelled"


def test_a_run_whose_agent_another_host_took_over_ends_at_its_last_commit(
    ledger: Ledger,
) -> None:
    """Host A runs run 1; host B accepts run 2 meanwhile, so A's next commit that touches the
    agent's stream (the ScheduleRequested of schedule_once) loses. What A recorded since its
    last good commit is not in the ledger; A ends run 1 right there and stands down."""
    from events import StreamConflict
    from events.aggregates import run_stream_id

    register_script(
        "takeover",
        {
            "latency_s": 0.3,
            "steps": [
                {"tool_calls": [{"name": "log_decision", "arguments": {"reasoning": "look"}}]},
                {
                    "tool_calls": [
                        {"name": "schedule_once", "arguments": {"delay_seconds": 60, "focus": "x"}}
                    ]
                },
                {"content": "scheduled"},
            ],
        },
    )
    a = AgentRuntime(ledger, "taken", models=["scripted/takeover"])
    b = AgentRuntime(ledger, "taken", models=["scripted/takeover"])

    async def scenario() -> None:
        run = asyncio.create_task(a.run("webhook"))
        await asyncio.sleep(0.45)  # A's first commit is in (~0.3 s), its second not yet
        await b.submit("webhook")
        with pytest.raises(StreamConflict):
            await run

    asyncio.run(scenario())
    a.close()
    b.close()
    events = ledger.stream(run_stream_id("taken", 1))
    assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
    ended = [e for e in events if isinstance(e, ev.TERMINAL_RUN_EVENTS)]
    assert len(ended) == 1 and ended[0] is events[-1] and isinstance(ended[0], ev.RunFailed)
    assert "another host took over" in ended[0].error
    agent_events = ledger.stream(ledger.load_agent("taken").id)
    assert not any(isinstance(e, ev.ScheduleRequested) for e in agent_events)
    assert [e.run_no for e in agent_events if isinstance(e, ev.RunQueued)] == [1, 2]
