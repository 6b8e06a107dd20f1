"""Rate-limit windows come from the ledger: a restart or an app change does not reset them."""

from __future__ import annotations

import time
from pathlib import Path

from events import Ledger
from events import catalog as ev
from owlclaw.app import RateLimit, load_app
from owlclaw.messages import RunResult
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.tools.governance import Governance
from owlclaw.tools.rate_limits import RateLimiter
from tests.apps import make_app
from tests.scripted import decide, play, run_events

TWO_PER_HOUR = {"governance": {"rate_limits": {"log_decision": {"calls": 2, "per_seconds": 3600}}}}
LIMITED_TOML = "[governance]\nrate_limits = { log_decision = { calls = 2, per_seconds = 3600 } }\n"


def outcomes(ledger: Ledger, result: RunResult) -> list[str]:
    return [
        type(e).__name__
        for e in run_events(ledger, result)
        if isinstance(e, ev.ToolCallSucceeded | ev.ToolCallDenied)
    ]


def test_a_window_survives_a_restart(ledger: Ledger) -> None:
    governance = Governance.from_app_config(TWO_PER_HOUR)
    first = AgentRuntime(ledger, "limited", models=["x"], governance=governance)
    assert outcomes(ledger, play(first, [decide(1), decide(2), {"content": "ok"}])) == [
        "ToolCallSucceeded",
        "ToolCallSucceeded",
    ]
    first.close()
    restarted = AgentRuntime(ledger, "limited", models=["x"], governance=governance)
    result = play(restarted, [decide(3), {"content": "ok"}])
    [denied] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallDenied)]
    assert denied.reason.startswith("rate limit: log_decision allows 2 calls per 3600 s")


def test_an_app_change_keeps_the_window_and_a_new_limit_counts_recorded_calls(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "app")
    runtime = AgentRuntime(ledger, "changing", models=["x"], app=load_app(root))
    play(runtime, [decide(1), decide(2), {"content": "ok"}])  # no limit yet
    (root / "owlclaw.toml").write_text(LIMITED_TOML)
    limited = play(runtime, [decide(3), {"content": "ok"}])
    assert outcomes(ledger, limited) == ["ToolCallDenied"]  # the two calls before the limit count
    (root / "SOUL.md").write_text("# Soul\nChanged.\n")  # another app change: same window
    assert outcomes(ledger, play(runtime, [decide(4), {"content": "ok"}])) == ["ToolCallDenied"]


def test_only_calls_inside_the_window_are_loaded(ledger: Ledger) -> None:
    governance = Governance.from_app_config(TWO_PER_HOUR)
    runtime = AgentRuntime(ledger, "windowed", models=["x"], governance=governance)
    play(runtime, [decide(1), decide(2), {"content": "ok"}])
    agent = ledger.load_agent("windowed")
    limits = {"log_decision": RateLimit(calls=2, per_seconds=3600)}
    now = time.time()
    current = RateLimiter(limits)
    current.load(ledger, agent, now)
    assert (current.admit("log_decision", now) or "").startswith("rate limit:")
    an_hour_later = RateLimiter(limits)
    an_hour_later.load(ledger, agent, now + 3600)
    assert an_hour_later.admit("log_decision", now + 3600) is None
