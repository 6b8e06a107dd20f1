"""Skills beyond the prompt's budget are never silently absent: the index names every skill,
and load_skill brings one in full, recorded with its hash."""

from __future__ import annotations

import asyncio
from pathlib import Path

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.audit.verify import replay_run
from owlclaw.config import RuntimeConfig
from owlclaw.llm.tokens import token_counter
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.skills_prompt import skills_index
from tests.apps import make_app, skill
from tests.scripted import run_events, run_script

tokens = token_counter("scripted/demo")
LONG = "Step by step, how to size a hedge. " * 60  # ~500 tokens


def load_skill(name: str) -> dict[str, object]:
    return {"name": "load_skill", "arguments": {"name": name}}


def skilled_app(root: Path) -> Path:
    return make_app(
        root,
        {
            "alpha": skill("alpha", "Short alpha notes."),
            "beta": skill("beta", LONG),
            "gamma": skill("gamma", LONG),
        },
    )


def test_the_index_lists_every_skill_within_its_own_budget(tmp_path: Path) -> None:
    app = load_app(skilled_app(tmp_path / "app"))
    section, listed = skills_index(app.skills, {"alpha"}, tokens)
    assert listed == ["alpha", "beta", "gamma"]
    assert "- alpha: alpha skill (in full below)" in section
    assert "- beta: beta skill\n" in section + "\n"
    tight, shown = skills_index(app.skills, set(), tokens, budget_tokens=8)
    assert shown == ["alpha"] and "… and 2 more" in tight
    assert skills_index({}, set(), tokens) == ("", [])


def test_a_skill_outside_the_budget_is_indexed_and_loaded_on_demand(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = skilled_app(tmp_path / "hedger")
    runtime = AgentRuntime(
        ledger,
        "hedger",
        models=["scripted/none"],
        app_dir=root,
        limits=RuntimeConfig(skills_tokens=100),  # alpha's body fits, beta's and gamma's do not
    )
    asyncio.run(runtime.inbox.load())  # registers the agent and loads its app
    prompt = asyncio.run(runtime.briefing.system_prompt(None, "webhook"))
    assert prompt.inputs["skills"] == ["alpha"] and prompt.inputs["skill_index"] == [
        "alpha",
        "beta",
        "gamma",
    ]
    assert "## Skill: alpha" in prompt.text and LONG.strip() not in prompt.text
    assert "- gamma: gamma skill" in prompt.text

    result = run_script(
        runtime,
        "skills",
        [
            {"tool_calls": [load_skill("beta")]},
            {"tool_calls": [load_skill("delta")]},
            {"content": "ok"},
        ],
    )
    events = run_events(ledger, result)
    [loaded] = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    app = load_app(root)
    assert loaded.result == {
        "name": "beta",
        "sha256": app.skills["beta"].sha256,
        "content": app.skills["beta"].body(),
    }
    [unknown] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert unknown.error_code == "UNKNOWN_SKILL" and "alpha, beta, gamma" in unknown.error
    runtime.close()
    assert replay_run(ledger, "hedger", 1, app=app).matched
