"""The in-process host beyond the ``Agents`` contract (tests/agents_contract.py): what a resumed
run re-executes, and an app directory that stops loading."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Activate, Result, RunResult, Submit
from owlclaw.runtime import app_code
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.app_code import EXIT_GRACE_S, STARTUP_S
from owlclaw.tools.capabilities import Registry
from tests.apps import make_app

pytestmark = pytest.mark.integration


TERMINAL = {cls.__name__ for cls in ev.TERMINAL_RUN_EVENTS}


def config() -> OwlClawConfig:
    register_script("host-answer", [{"content": "done"}])
    return config_with("scripted/host-answer")


def config_with(model: str) -> OwlClawConfig:
    return OwlClawConfig(runtime=RuntimeConfig(models=(model,)))


def interrupted_run(ledger: Ledger, agent_id: str, tool: str, arguments: dict[str, object]) -> str:
    """What a process leaves behind when it dies right after committing a tool request:
    the run's start, its first model response and the write-ahead ToolCallRequested."""
    agent = ledger.register_agent(agent_id)
    queued = agent.queue_run("webhook", focus="interrupted")
    run = Run.start(agent_id, queued)
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

    async def activate() -> RunResult:
        host = AgentHost(ledger, config_with("scripted/resume"))
        result = await host.ask(
            Result(agent_id="crashed", run_id=run_id)
        )  # activation resumes it first
        await host.close()
        return result

    result = asyncio.run(activate())
    kinds = [type(e).__name__ for e in ledger.stream(uuid.UUID(run_id))]
    assert result.status == "completed"
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

    async def scenario() -> list[RunResult]:
        host = AgentHost(ledger, config())
        results = [
            await host.ask(
                Result(
                    agent_id="broken",
                    run_id=await host.ask(Submit(agent_id="broken", trigger="webhook")),
                )
            )
        ]
        results.append(
            await host.ask(
                Result(
                    agent_id="healthy",
                    run_id=await host.ask(Submit(agent_id="healthy", trigger="webhook")),
                )
            )
        )
        (root / "SOUL.md").write_text("# Soul\\nBack.\\n")
        results.append(
            await host.ask(
                Result(
                    agent_id="broken",
                    run_id=await host.ask(Submit(agent_id="broken", trigger="webhook")),
                )
            )
        )
        await host.close()
        return results

    failed, other, repaired = asyncio.run(scenario())
    assert (failed.status, other.status, repaired.status) == (
        "failed",
        "completed",
        "completed",
    )
    [first] = ledger.list_runs("broken")[:1]
    [error] = [e for e in ledger.stream(first) if isinstance(e, ev.RunFailed)]
    assert "SOUL.md not found" in error.error


def test_rate_limit_windows_survive_passivation_and_a_restart(
    fresh_db: Database, tmp_path: Path
) -> None:
    register_script(
        "limited",
        [
            {"tool_calls": [{"name": "log_decision", "arguments": {"reasoning": "r"}}]},
            {"content": "done"},
        ],
    )
    root = make_app(
        tmp_path / "app",
        config="[governance]\nrate_limits = { log_decision = { calls = 2, per_seconds = 3600 } }\n",
    )

    async def calls(ledger: Ledger, runs: int, *, after_passivation: bool) -> tuple[list[str], int]:
        """The outcome of each run's log_decision; how often the host passivated the agent."""
        host = AgentHost(ledger, config_with("scripted/limited"), idle_s=0.2)
        outcomes = []
        for _ in range(runs):
            if after_passivation and "limited" in (await host.status("limited")).agents:
                deadline = time.monotonic() + 30
                while "limited" in (await host.status("limited")).agents:
                    assert time.monotonic() < deadline, "never passivated"
                    await asyncio.sleep(0.05)
            run_id = await host.ask(Submit(agent_id="limited", trigger="webhook"))
            await host.ask(Result(agent_id="limited", run_id=run_id))
            outcomes += [
                type(e).__name__
                for e in ledger.stream(uuid.UUID(run_id))
                if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallDenied)
            ]
        await host.close()
        return outcomes, host.status_now().passivations

    with Ledger(fresh_db.url) as ledger:
        ledger.register_agent("limited", str(root))
        served = asyncio.run(calls(ledger, 3, after_passivation=True))
    assert served == (["ToolCallSucceeded", "ToolCallSucceeded", "ToolCallDenied"], 2)
    with Ledger(fresh_db.url) as restarted:  # another process: a new ledger and host
        assert asyncio.run(calls(restarted, 1, after_passivation=False)) == (
            ["ToolCallDenied"],
            0,
        )
        [run_id] = restarted.list_runs("limited")[-1:]
        [denied] = [e for e in restarted.stream(run_id) if isinstance(e, ev.ToolCallDenied)]
        assert denied.reason.startswith("rate limit: log_decision allows 2 calls per 3600 s")


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        ("while True: pass", "did not finish importing within 3 s"),
        ("raise RuntimeError('no market data')", "failed to import: RuntimeError: no market data"),
    ],
)
def test_an_app_whose_code_hangs_or_raises_at_import_fails_alone_and_loads_once_fixed(
    ledger: Ledger, tmp_path: Path, statement: str, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Activation returns within the time limit with AppLoadFailed recorded; meanwhile another
    agent of the host completes a run; the broken agent's runs fail at once naming the app; a
    fixed handlers.py is loaded by the next run."""
    root = make_app(tmp_path / "looper")
    handlers = root / "handlers.py"
    handlers.write_text(f"from owlclaw import Registry\nregistry = Registry()\n{statement}\n")
    ledger.register_agent("looper", str(root))
    ledger.register_agent("healthy")
    limits = RuntimeConfig(models=("scripted/host-answer",), app_load_timeout_s=3.0)
    register_script("host-answer", [{"content": "done"}])
    probed: list[str] = []
    probe = app_code.probe

    def counted(path: Path, source: str, timeout_s: float) -> None:
        probed.append(source)
        probe(path, source, timeout_s)

    monkeypatch.setattr(app_code, "probe", counted)

    async def scenario() -> tuple[float, bool, list[RunResult], list[int]]:
        host = AgentHost(ledger, OwlClawConfig(runtime=limits))
        activating = asyncio.create_task(host.ask(Activate(agent_id="looper")))
        healthy = await host.ask(
            Result(
                agent_id="healthy",
                run_id=await host.ask(Submit(agent_id="healthy", trigger="webhook")),
            )
        )
        looper_was_loading = not activating.done()
        activation_ms = await activating
        probes = [len(probed)]
        results = [
            healthy,
            await host.ask(
                Result(
                    agent_id="looper",
                    run_id=await host.ask(Submit(agent_id="looper", trigger="webhook")),
                )
            ),
        ]
        probes.append(len(probed))
        handlers.write_text(handlers.read_text().replace(statement, ""))
        results.append(
            await host.ask(
                Result(
                    agent_id="looper",
                    run_id=await host.ask(Submit(agent_id="looper", trigger="webhook")),
                )
            )
        )
        await host.close()
        return activation_ms, looper_was_loading, results, probes

    activation_ms, looper_was_loading, (healthy, failed, fixed), probes = asyncio.run(scenario())
    assert activation_ms < (STARTUP_S + 3.0 + EXIT_GRACE_S) * 1000  # bounded, never wedged
    assert healthy.status == "completed"
    assert looper_was_loading or "raise" in statement  # a hang: the other agent ran meanwhile
    assert (failed.status, fixed.status) == ("failed", "completed")
    assert probes == [1, 1]  # the failed run: the recorded error, without a second probe
    [run_failed] = [
        e for e in ledger.stream(uuid.UUID(failed.run_id)) if isinstance(e, ev.RunFailed)
    ]
    assert str(handlers) in run_failed.error and error in run_failed.error
    events = ledger.stream(agent_stream_id("looper"))
    [load_failed] = [e for e in events if isinstance(e, ev.AppLoadFailed)]
    assert load_failed.app_dir == str(root) and error in load_failed.error
    assert f'File "{handlers}", line 3' in load_failed.details
    # the fixed code, loaded as its run starts (the run queued before, sealed when it ended)
    assert [type(e) for e in events[-3:]] == [ev.RunQueued, ev.IdentityLoaded, ev.RunSealed]
    assert ledger.load_agent("looper").state.app_error is None


def test_closing_the_host_while_a_run_is_in_flight_stops_its_consumer(ledger: Ledger) -> None:
    """Closing cancels each agent's consumer; one that is awaiting a run must stop, not take
    the cancellation for the run's own and wait for the next message until it passivates."""
    register_script("host-slow", {"steps": [{"content": "late"}], "latency_s": 60})
    ledger.register_agent("closing")

    async def go() -> AgentHost:
        host = AgentHost(ledger, config_with("scripted/host-slow"))  # never passivates
        await host.ask(Submit(agent_id="closing", trigger="webhook"))
        while not host.status_now().agents.get("closing", None) or not (
            host.status_now().agents["closing"].running
        ):
            await asyncio.sleep(0.05)
        await asyncio.wait_for(host.close(), 10)  # not after the run, nor the next message
        return host

    host = asyncio.run(go())
    assert host.status_now().agents == {}
