"""A run whose system prompt is over its token budget, on the real ledger: the prompt sent is
within the budget, and the run records what was trimmed and how many tokens it came to; the
audit's rebuild of that prompt trims the same."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.audit.decision_points import AgentRecord
from owlclaw.audit.explain import explain_run
from owlclaw.config import RuntimeConfig
from owlclaw.llm.tokens import token_counter
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.apps import make_app, skill
from tests.scripted import play, run_events

pytestmark = pytest.mark.integration

BODY = "Check the spread, then the depth of the book, then the news. " * 40  # ~600 tokens


def test_a_trimmed_prompt_is_within_budget_and_records_what_it_left_out(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "desk", {n: skill(n, BODY) for n in ("alpha", "beta", "gamma")})
    limits = RuntimeConfig(prompt_tokens=1200, skills_tokens=10_000)  # all three bodies chosen
    runtime = AgentRuntime(ledger, "desk", models=["scripted/none"], app_dir=root, limits=limits)
    result = play(runtime, [{"content": "ok"}])
    runtime.close()
    [response] = [e for e in run_events(ledger, result) if isinstance(e, ev.LLMResponded)]
    inputs = response.inputs
    assert inputs["trimmed"] == {"skill_bodies": ["beta", "gamma"]}  # the last body first
    assert inputs["skills"] == ["alpha"] and inputs["skill_index"] == ["alpha", "beta", "gamma"]
    assert inputs["prompt_tokens"] <= 1200

    record = AgentRecord(ledger, "desk", app=load_app(root), limits=limits)
    context = asyncio.run(record.context(1))
    sent = context.opening[0]["content"]
    assert token_counter("scripted/none")(sent) == inputs["prompt_tokens"]
    assert "## Skill: alpha" in sent and "## Skill: beta" not in sent and "- gamma: " in sent
    assert context.drift == []
    manifest = explain_run(ledger, "desk", 1)
    assert manifest.prompt_trimmed == inputs["trimmed"]
    assert manifest.prompt_tokens == inputs["prompt_tokens"]
