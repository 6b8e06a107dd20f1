"""`owlclaw memory --as-of`, `owlclaw agent --as-of` and `owlclaw explain` on a real ledger:
what an agent held, ran with and decided at a past moment, from the recorded events alone."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from events import Ledger
from events import catalog as ev
from events.argument_digest import arguments_digest
from events.run import Run
from owlclaw.cli import app
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.messages import Submit
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import LOCAL_MODEL, Embedder
from tests.apps import SOUL, make_app
from tests.scripted import call, play

pytestmark = pytest.mark.integration

LESSON = "After a sharp drop, rebound signals are accurate within two hours"
COFFEE = "The coffee machine is on the third floor"
GOVERNED = '[governance]\ndeny = ["forget"]\n'


def invoke(db: Database, data_dir: Path, *args: str) -> tuple[int, str]:
    """``owlclaw ARGS`` through the CLI app on the test's database: exit code and output."""
    result = CliRunner().invoke(
        app,
        list(args),
        env={
            "OWLCLAW_DATABASE_URL": db.url,
            "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
            "OWLCLAW_DATA_DIR": str(data_dir),
            "COLUMNS": "200",
        },
    )
    return result.exit_code, result.stdout


@pytest.fixture
def owlclaw(fresh_db: Database, tmp_path: Path) -> Callable[..., Any]:
    """``owlclaw ARGS --json``: its JSON, or the exit code when it fails."""

    def json_of(*args: str) -> Any:
        code, output = invoke(fresh_db, tmp_path / "data", *args, "--json")
        return json.loads(output) if code == 0 else code

    return json_of


@pytest.fixture
def printed(fresh_db: Database, tmp_path: Path) -> Callable[..., str]:
    """What ``owlclaw ARGS`` prints for a person (it must succeed), whitespace collapsed."""

    def text_of(*args: str) -> str:
        code, output = invoke(fresh_db, tmp_path / "data", *args)
        assert code == 0, output
        return " ".join(output.split())

    return text_of


def positions(ledger: Ledger, agent_id: str, kind: type[ev.LedgerEvent]) -> list[int]:
    return [h.position for h in ledger.agent_history(agent_id) if isinstance(h.event, kind)]


def contents(reading: dict[str, Any]) -> list[str]:
    return [m["content"] for m in reading["memories"]]


def test_memory_as_of_holds_a_memory_from_its_remembering_until_it_is_forgotten(
    ledger: Ledger,
    local_embedder: Embedder,
    owlclaw: Callable[..., Any],
    printed: Callable[..., str],
) -> None:
    store = MemoryStore(MemoryView(ledger, embedder=local_embedder))
    store.view.create_table()
    runtime = AgentRuntime(ledger, "trader", models=["x"], memory=store)
    play(runtime, [{"tool_calls": [call("remember", content=LESSON)]}, {"content": "ok"}])
    unindexed = AgentRuntime(ledger, "trader", models=["x"])  # no recall: model not recorded
    play(unindexed, [{"tool_calls": [call("remember", content=COFFEE)]}, {"content": "ok"}])
    [lesson] = [
        h.event
        for h in ledger.agent_history("trader")
        if isinstance(h.event, ev.MemoryRemembered) and h.event.content == LESSON
    ]
    play(runtime, [{"tool_calls": [call("forget", memory_id=str(lesson.memory_id))]}, {}])
    unindexed.close()
    remembered, _ = positions(ledger, "trader", ev.MemoryRemembered)
    [forgotten] = positions(ledger, "trader", ev.MemoryForgotten)
    [forgotten_at] = [
        h.event.timestamp
        for h in ledger.agent_history("trader")
        if isinstance(h.event, ev.MemoryForgotten)
    ]

    def recall(moment: str) -> list[str]:
        return contents(
            owlclaw("memory", "trader", "--as-of", moment, "--recall", "rebound")["recall"]
        )

    assert recall(f"@{remembered - 1}") == []
    assert recall(f"@{remembered}") == [LESSON]
    assert recall(f"@{forgotten - 1}")[0] == LESSON
    assert LESSON not in recall(f"@{forgotten}")
    assert recall(lesson.timestamp.isoformat()) == [LESSON]  # ISO-8601 times cut the same way
    assert LESSON not in recall(forgotten_at.isoformat())

    between = owlclaw("memory", "trader", "--as-of", f"@{forgotten - 1}")
    assert between["as_of"]["position"] <= forgotten - 1
    models = {
        m["content"]: (m["embedding_model"], m["embedding_model_recorded"])
        for m in between["memories"]
    }
    assert models == {LESSON: (LOCAL_MODEL, True), COFFEE: (LOCAL_MODEL, False)}

    # the same scoring as the recall tool: similarity x decay, as of the moment
    ProjectionRunner(ledger, store.view).catch_up()
    now = owlclaw("memory", "trader", "--as-of", f"@{ledger.log.head()}", "--recall", "coffee")
    at = datetime.fromisoformat(now["as_of"]["at"])
    [served] = store.recall("trader", "coffee", now=at).memories
    [rebuilt] = now["recall"]["memories"]
    assert rebuilt["content"] == served.content == COFFEE
    assert rebuilt["decay"] == pytest.approx(served.decay, abs=1e-6)
    assert rebuilt["relevance"] == pytest.approx(served.relevance, abs=2e-3)  # halfvec index

    play(runtime, [{"tool_calls": [call("recall", query="coffee")]}, {"content": "ok"}])
    [recalled] = owlclaw("explain", "trader", "4", "1")["steps"][0]["recalled"]
    runtime.close()
    assert recalled["content"] == COFFEE
    assert recalled["relevance"] == pytest.approx(served.relevance, abs=1e-5)
    assert f"recalled {recalled['relevance']:.3f} {COFFEE}" in printed("explain", "trader", "4")

    listed = printed("memory", "trader", "--as-of", f"@{forgotten - 1}")
    assert "(configured)" in listed and "rebound" in listed  # the table may wrap the model
    assert "rebound" not in printed("memory", "trader", "--as-of", f"@{forgotten}")
    assert owlclaw("memory", "trader", "--as-of", "yesterday") == 2
    assert owlclaw("memory", "trader", "--as-of", "@0") == 3  # nothing recorded by then


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


EDITED = SOUL + "I never trade on Fridays.\n"
EDITED_AGAIN = EDITED + "Nor on Mondays.\n"


def three_runs(ledger: Ledger, root: Path) -> dict[str, int]:
    """Run 1; a schedule; SOUL.md edited; run 2 (a call to a hidden tool); run 3 queued, then
    SOUL.md edited again before it runs; the schedule cancelled. The log positions between."""
    make_app(root, config=GOVERNED)
    runtime = AgentRuntime(ledger, "auditee", models=["x"], app_dir=root)
    play(runtime, [{"content": "first"}])
    agent = ledger.load_agent("auditee")
    agent.record(
        ev.ScheduleRequested, schedule_id="s1", kind="cron", focus="check", cron="0 * * * *"
    )
    ledger.append(agent)
    (root / "SOUL.md").write_text(EDITED)
    turn = [call("forget", memory_id="00000000-0000-0000-0000-000000000000")]
    play(runtime, [{"tool_calls": turn}, {"content": "second"}])
    _, queued = asyncio.run(runtime.inbox.submit(Submit(agent_id="auditee", trigger="webhook")))
    assert queued is not None
    (root / "SOUL.md").write_text(EDITED_AGAIN)  # while run 3 waits in the queue
    register_script("third", [{"content": "third"}])
    runtime.models = ["scripted/third"]
    asyncio.run(runtime.run_queued(queued))
    runtime.close()
    agent = ledger.load_agent("auditee")
    agent.cancel_schedule("s1", by="console:alice")
    ledger.append(agent)
    first_end, second_end, _ = positions(ledger, "auditee", ev.RunCompleted)
    [scheduled] = positions(ledger, "auditee", ev.ScheduleRequested)
    return {"first_end": first_end, "scheduled": scheduled, "second_end": second_end}


def test_an_identity_edit_between_two_runs_shows_in_agent_as_of(
    ledger: Ledger, tmp_path: Path, owlclaw: Callable[..., Any], printed: Callable[..., str]
) -> None:
    at = three_runs(ledger, tmp_path / "auditee")
    before = owlclaw("agent", "auditee", "--as-of", f"@{at['scheduled']}")
    at_second = owlclaw("agent", "auditee", "--as-of", f"@{at['second_end']}")
    after = owlclaw("agent", "auditee")
    assert [a["identity"]["number"] for a in (before, at_second, after)] == [1, 2, 3]
    assert [a["identity"]["soul_sha256"] for a in (before, at_second, after)] == [
        sha(SOUL),
        sha(EDITED),
        sha(EDITED_AGAIN),
    ]
    assert before["identity"]["identity_sha256"] == after["identity"]["identity_sha256"]
    assert at_second["identity"]["changed"] == after["identity"]["changed"] == ["SOUL.md"]
    assert before["identity"]["governance"]["deny"] == ["forget"]
    assert list(before["schedules"]) == ["s1"] and after["schedules"] == {}
    assert owlclaw("agent", "auditee", "--as-of", f"@{at['first_end']}")["schedules"] == {}
    assert [a["runs"] for a in (before, at_second, after)] == [1, 2, 3]
    assert before["spent"]["day"] == before["at"][:10]
    assert f"SOUL.md {sha(SOUL)}" in printed("agent", "auditee", "--as-of", f"@{at['scheduled']}")


def test_explain_names_the_changed_file_and_why_a_tool_was_hidden(
    ledger: Ledger, tmp_path: Path, owlclaw: Callable[..., Any], printed: Callable[..., str]
) -> None:
    three_runs(ledger, tmp_path / "auditee")
    first = owlclaw("explain", "auditee", "1")
    assert first["identity"]["number"] == 1 and first["changed_since_previous_run"] == []
    second = owlclaw("explain", "auditee", "2")
    assert second["identity"]["soul_sha256"] == sha(EDITED)
    assert second["identity"]["changed"] == ["SOUL.md"]
    assert second["changed_since_previous_run"] == ["SOUL.md"]
    assert second["hidden_tools"]["forget"] == "denied by governance.deny"
    assert "forget" not in second["visible_tools"]
    assert second["model_path"] == [second["steps"][0]["model"]]
    assert [s["number"] for s in second["steps"]] == [1, 2]
    [denied] = second["steps"][0]["calls"]
    assert denied["tool"] == "forget" and denied["outcome"].startswith("denied")
    assert second["steps"][0]["governance"] == [f"forget ({denied['call_id']}) {denied['outcome']}"]

    third = owlclaw("explain", "auditee", "3")  # the identity it ran with, loaded after queueing
    assert third["identity"]["soul_sha256"] == sha(EDITED_AGAIN)
    assert (third["identity"]["number"], third["changed_since_previous_run"]) == (3, ["SOUL.md"])

    [last] = owlclaw("explain", "auditee", "2", "2")["steps"]
    assert (last["number"], last["answer"], last["calls"]) == (2, "second", [])
    explained = printed("explain", "auditee", "2")
    assert "changed since the previous run: SOUL.md" in explained
    assert "hidden forget: denied by governance.deny" in explained
    assert f"governance: forget ({denied['call_id']}) denied" in explained
    assert "rate limits: none budget: none" in explained  # as text, not a Python dict
    assert "{'" not in explained and "': " not in explained
    assert owlclaw("explain", "auditee", "2", "3") == 3
    assert owlclaw("explain", "auditee", "4") == 3


def record_governed_run(ledger: Ledger, agent_id: str) -> None:
    """A run whose model fell back once, whose order waited for approval (granted) and whose
    third quote was rate-limited; it ended over the daily token budget."""
    agent = ledger.load_agent(agent_id)
    run = Run.start(agent_id, agent.queue_run("webhook", focus="buy"))
    calls = [
        {"id": c, "type": "function", "function": {"name": t, "arguments": "{}"}}
        for c, t in (("o1", "place_order"), ("q3", "quote"))
    ]
    run.record(
        ev.LLMResponded,
        model="openai/gpt-4o-mini",
        message={"role": "assistant", "content": None, "tool_calls": calls},
        fallback_hops=["anthropic/claude-3-5-haiku: Timeout: no answer in 30 s"],
        usage={"total_tokens": 900},
        cost_usd=0.0012,
        inputs={"model_path": ["anthropic/claude-3-5-haiku", "openai/gpt-4o-mini"]},
    )
    approval = agent.request_approval(
        run.id, "o1", "place_order", {}, "governance.ask names it", [], 3600
    )
    run.record(ev.RunParked, approval_id=approval, call_id="o1")
    agent.answer_approval(approval, True, "alice", digest=arguments_digest({}))
    run.record(ev.ToolCallRequested, call_id="o1", tool="place_order", arguments={})
    run.record(ev.ToolCallSucceeded, call_id="o1", tool="place_order", result={"ok": True})
    run.record(
        ev.ToolCallDenied,
        call_id="q3",
        tool="quote",
        reason="rate limit: 2 calls per 60 s",
        error_code="RATE_LIMITED",
    )
    agent.record(
        ev.BudgetExceeded, run_id=run.id, budget="daily_tokens", limit=2000.0, spent=2354.0
    )
    run.end(ev.RunTerminated, reason="daily_tokens budget exceeded")
    ledger.append(agent, run)


def test_explain_reads_governance_fallbacks_and_cost_from_hand_recorded_runs(
    ledger: Ledger, owlclaw: Callable[..., Any]
) -> None:
    """No app, no view: tokens, cost, fallbacks, approvals, rate limits and the budget come
    from the events alone."""
    from tests.sample_run import AGENT_ID, record_sample_run

    record_sample_run(ledger)
    record_governed_run(ledger, AGENT_ID)
    manifest = owlclaw("explain", AGENT_ID, "1")
    assert manifest["hidden_tools"] == {"schedule_cron": "denied by governance.deny"}
    assert manifest["tokens"] == 1454
    assert manifest["identity"]["changed"][:2] == ["SOUL.md", "IDENTITY.md"]
    assert manifest["identity"]["governance"] == {}  # recorded before it was kept
    assert [c["tool"] for c in manifest["steps"][0]["calls"]] == ["query_state"]
    assert manifest["steps"][0]["calls"][0]["outcome"] == "succeeded"
    assert UUID(manifest["run_id"])

    governed = owlclaw("explain", AGENT_ID, "2")
    [step] = governed["steps"]
    assert governed["model_path"] == ["anthropic/claude-3-5-haiku", "openai/gpt-4o-mini"]
    assert step["model"] == "openai/gpt-4o-mini"
    assert step["fallback_hops"] == ["anthropic/claude-3-5-haiku: Timeout: no answer in 30 s"]
    assert (step["usage"], step["cost_usd"]) == ({"total_tokens": 900}, 0.0012)
    assert [c["outcome"] for c in step["calls"]] == [
        "succeeded",
        "denied RATE_LIMITED: rate limit: 2 calls per 60 s",
    ]
    assert step["governance"] == [
        "quote (q3) denied RATE_LIMITED: rate limit: 2 calls per 60 s",
        "place_order (o1) waited for approval: governance.ask names it",
        "approval granted by alice",
    ]
    [exceeded] = governed["budget"]["exceeded"]
    assert (exceeded["budget"], exceeded["spent"]) == ("daily_tokens", 2354.0)
    assert governed["ended"] == "terminated: daily_tokens budget exceeded"

    spent = owlclaw("agent", AGENT_ID)["spent"]
    assert (spent["tokens"], spent["cost_usd"]) == (1454 + 900, 0.0012)
