"""Driving the runtime with the scripted model in tests, and reading what a run recorded."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.llm.scripted import register_script
from owlclaw.messages import RunResult
from owlclaw.runtime.agent_runtime import AgentRuntime


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"name": name, "arguments": arguments}


def decide(i: int) -> dict[str, Any]:
    """A scripted model turn that logs decision number ``i``."""
    return {"tool_calls": [call("log_decision", reasoning=f"step {i}", decision_type="other")]}


def run_script(runtime: AgentRuntime, script: str, steps: list[Any], **kwargs: Any) -> RunResult:
    """One run of ``runtime`` (a webhook unless ``trigger`` is given) answered by ``steps``."""
    register_script(script, steps)
    runtime.models = [f"scripted/{script}"]
    return asyncio.run(runtime.run(**{"trigger": "webhook", **kwargs}))


def play(runtime: AgentRuntime, steps: list[Any], focus: str | None = None) -> RunResult:
    """``run_script`` under a fresh script name."""
    return run_script(runtime, f"s{uuid.uuid4().hex[:8]}", steps, focus=focus)


def run_events(ledger: Ledger, result: RunResult) -> list[ev.LedgerEvent]:
    return ledger.stream(uuid.UUID(result.run_id))


def agent_events(ledger: Ledger, agent_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(ledger.load_agent(agent_id).id)
