"""Counterfactual re-decision (`replay --model`) and `owlclaw eval` on recorded runs of the demo
trading agent, with scripted candidates."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from events import Ledger
from events import catalog as ev
from events.streams import eval_stream_id
from owlclaw.audit.decision_points import AgentRecord
from owlclaw.audit.redecide import ReDecision, redecide
from owlclaw.database import Database
from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.llm.scripted import load_script_dir
from owlclaw.runtime.agent_runtime import AgentRuntime
from tests.cli import owlclaw_on as owlclaw
from tests.scripted import call

pytestmark = pytest.mark.integration

AGENT = "trader"
LOG = call("log_decision", reasoning="no entry yet", decision_type="no_action")
RECORDED = [
    {"tool_calls": [call("query_state", state_name="market_state")]},
    {"tool_calls": [call("entry_check", symbol="ACME")]},
    {"tool_calls": [LOG]},
    {"content": "No entry."},
]
SAME = RECORDED
STEP2 = [
    RECORDED[0],
    {"tool_calls": [call("place_order", symbol="ACME", side="buy", notional_usd=5)]},
]
REORDERED = [RECORDED[1], RECORDED[0], *RECORDED[2:]]
MIXED = {
    "steps": RECORDED,
    "cases": [
        {  # every 5th run: other arguments at step 3
            "when": "review",
            "steps": [*RECORDED[:2], {"tool_calls": [call("log_decision", reasoning="x")]}],
        },
        {"when": "audit", "steps": STEP2},  # a tool the recording did not call, at step 2
        {  # the model fails at step 1
            "when": "broken",
            "steps": [{"tool_calls": [call("recall", query="{{result.none.x}}")]}],
        },
    ],
}


def demo_app(root: Path) -> Path:
    """The demo trading app without its model (the tests choose it), with the scripts."""
    app = root / AGENT
    shutil.copytree(
        Path(str(resources.files("owlclaw") / "demo" / "trading")),
        app,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    config = (app / "owlclaw.toml").read_text().replace('models = ["scripted/trader"]\n', "")
    (app / "owlclaw.toml").write_text(config)
    for name, script in {
        "recorded": RECORDED,
        "same": SAME,
        "step2": STEP2,
        "reordered": REORDERED,
        "mixed": MIXED,
    }.items():
        (app / "scripts" / f"{name}.json").write_text(json.dumps(script))
    load_script_dir(app / "scripts")
    return app


def focus_of(n: int) -> str:
    marks = {5: "review", 7: "audit", 11: "broken"}
    mark = next((m for k, m in marks.items() if n % k == 0), "")
    return f"check entry {n} {mark}".strip()


def record_runs(ledger: Ledger, app: Path, runs: int) -> None:
    runtime = AgentRuntime(ledger, AGENT, models=["scripted/recorded"], app_dir=app)

    async def all_runs() -> None:
        for n in range(1, runs + 1):
            result = await runtime.run("webhook", focus=focus_of(n))
            assert result.status == "completed" and result.iterations == 4

    try:
        asyncio.run(all_runs())
    finally:
        runtime.close()


def agent_record(ledger: Ledger, app: Path) -> AgentRecord:
    from owlclaw.app import load_app
    from owlclaw.runtime.app_code import AppCode

    loaded = load_app(app)
    assert loaded.handlers is not None
    return AgentRecord(ledger, AGENT, app=loaded, registry=AppCode(10).load(loaded.handlers))


def redecided(ledger: Ledger, app: Path, model: str, follow: bool = False) -> ReDecision:
    record = agent_record(ledger, app)

    async def go() -> ReDecision:
        context = await record.context(2)
        assert context.drift == []  # the rebuilt prompt has the recorded inputs
        return await redecide(
            litellm_with_offline_providers(),
            context,
            f"scripted/{model}",
            timeout_s=10,
            follow=follow,
        )

    return asyncio.run(go())


def test_redecide_same_diverging_and_followed(
    fresh_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo_app(tmp_path)
    litellm = litellm_with_offline_providers()
    asked: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    acompletion = litellm.acompletion

    async def spy(**request: Any) -> Any:
        asked.append(copy.deepcopy((request["messages"], request["tools"])))
        return await acompletion(**request)

    with Ledger(fresh_db.url) as ledger:
        with monkeypatch.context() as patched:
            patched.setattr(litellm, "acompletion", spy)
            record_runs(ledger, app, 2)
        head = ledger.log.head()
        # run 2's requests (after run 1 and its recent activity) are rebuilt exactly
        points = asyncio.run(agent_record(ledger, app).context(2)).points()
        assert [(p.messages, p.tools) for p in points] == asked[4:]
        same = redecided(ledger, app, "same")
        assert same.outcome == "identical" and same.first_divergence is None
        assert [s.same for s in same.steps] == [True] * 4

        step2 = redecided(ledger, app, "step2")
        first = step2.first_divergence
        assert first is not None and first.step == 2 and step2.outcome == "new_tool"
        assert str(first.recorded) == 'entry_check {"symbol": "ACME"}'
        assert str(first.candidate) == (
            'place_order {"notional_usd": 5, "side": "buy", "symbol": "ACME"}'
        )

        followed = redecided(ledger, app, "reordered", follow=True)
        assert [(s.step, s.same, s.branch) for s in followed.steps] == [
            (1, False, False),
            (2, False, True),
            (3, True, True),
            (4, True, True),
        ]
        assert followed.stopped == "the candidate answered"
        cut = redecided(ledger, app, "step2", follow=True)
        assert [s.step for s in cut.steps] == [1, 2]
        assert cut.stopped is not None
        assert cut.stopped.startswith("no recorded outcome of place_order")
        assert ledger.log.head() == head  # re-deciding never writes

    shown = owlclaw(
        fresh_db, "replay", AGENT, "2", "--model", "scripted/step2", "--json", cwd=tmp_path
    )
    assert shown.returncode == 1, shown.stderr
    data = json.loads(shown.stdout)
    assert data["outcome"] == "new_tool"
    assert data["first_divergence"]["step"] == 2
    assert data["first_divergence"]["recorded"] == 'entry_check {"symbol": "ACME"}'
    assert data["first_divergence"]["candidate"].startswith("place_order")


def eval_json(db: Database, cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = owlclaw(db, "eval", *args, "--json", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_eval_over_50_runs_counts_gates_and_compares(fresh_db: Database, tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    with Ledger(fresh_db.url) as ledger:
        record_runs(ledger, app, 50)

    code, mixed = eval_json(
        fresh_db, tmp_path, AGENT, "--runs", "1..50", "--model", "scripted/mixed",
        "--max-divergence", "0.3", "--concurrency", "4",
    )  # fmt: skip
    assert mixed["runs"] == 50
    assert mixed["counts"] == {"identical": 30, "different": 10, "new_tool": 6, "refused": 4}
    assert mixed["divergent_fraction"] == 0.4 and code == 1  # 40% > 30%: the gate fails
    diverging = {d["run_no"]: d for d in mixed["diverging"]}
    assert sorted(diverging) == sorted(n for n in range(1, 51) if focus_of(n) != f"check entry {n}")
    assert diverging[7]["step"] == 2 and diverging[7]["candidate"].startswith("place_order")
    assert diverging[5]["step"] == 3 and diverging[11]["step"] == 1
    assert mixed["decisions"]["asked"] == 200
    # the scripted model counts 120 tokens a call; a refused call (4 runs' step 1) none
    assert mixed["recorded_tokens"] == 200 * 120 and mixed["tokens_delta"] == -4 * 120

    code, same = eval_json(
        fresh_db, tmp_path, AGENT, "--runs", "1..50", "--model", "scripted/same",
        "--max-divergence", "0",
    )  # fmt: skip
    assert code == 0 and same["counts"]["identical"] == 50 and same["diverging"] == []

    with Ledger(fresh_db.url) as ledger:
        events = ledger.stream(eval_stream_id(mixed["eval_id"]))
        assert ledger.chains.verify().ok  # eval streams are hash-chained like the others
    assert isinstance(events[0], ev.EvalStarted) and events[0].run_nos == list(range(1, 51))
    assert sum(isinstance(e, ev.EvalRunCompared) for e in events) == 50
    assert isinstance(events[-1], ev.EvalFinished) and events[-1].counts == mixed["counts"]

    code, compared = eval_json(fresh_db, tmp_path, "--compare", mixed["eval_id"], same["eval_id"])
    assert code == 0 and compared["common_runs"] == 50
    assert {c["run_no"]: c["b"] for c in compared["changed"]} == dict.fromkeys(
        diverging, "identical"
    )
    assert compared["a"]["counts"] == mixed["counts"]

    bad = owlclaw(fresh_db, "eval", AGENT, "--runs", "5..2", "--model", "x", cwd=tmp_path)
    assert bad.returncode == 2 and "is empty" in bad.stderr
