"""``owlclaw bench runtime --openai`` end to end with a tiny count: both loops ran every step
through the loopback server (figures are the bench's business, not asserted here)."""

from __future__ import annotations

import pytest

from owlclaw.bench import runtime_openai
from owlclaw.database import Database

pytestmark = pytest.mark.integration


def test_the_openai_bench_runs_both_loops_to_the_end(fresh_db: Database) -> None:
    result = runtime_openai.run(fresh_db.url, runs=2)
    steps = 2 * runtime_openai.TOOL_STEPS
    assert result["owlclaw_step"]["samples"] == steps
    assert result["bare_litellm_step"]["samples"] == steps
    calls = 2 * (runtime_openai.TOOL_STEPS + 1)
    assert result["owlclaw_acompletion"]["samples"] == calls
    assert result["bare_acompletion"]["samples"] == calls
    assert set(result["owlclaw_added_per_step_ms"]) == {"p50", "p95"}
    assert "loopback OpenAI-compatible server" in result["method"]
