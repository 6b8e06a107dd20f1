"""Heartbeat sources (seed 001: the heartbeat checks its sources before deciding to wake): the
[heartbeat] table refused when malformed, the wake decision given the sources' answers
(failures and timeouts wake nothing and are recorded), and the run it wakes shown why."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import owlclaw.heartbeat.checks as checks_module
from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.agent_state import WOKEN_BY
from events.streams import agent_stream_id
from owlclaw.app import AgentSettings, AppError, load_app
from owlclaw.cli import status
from owlclaw.heartbeat.checks import SourceChecks
from owlclaw.heartbeat.config import check_urls, heartbeat_sources
from owlclaw.heartbeat.wake import (
    FAILED,
    PAYLOAD_CHARS,
    PAYLOADS_KEPT,
    SourceResult,
    failures,
    wake_payload,
)
from owlclaw.llm.scripted import register_script
from owlclaw.reports.status import with_served
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.secrets import implicit
from owlclaw.server.validation import validate_app
from tests.apps import make_app
from tests.scripted import run_events

BEATING = AgentSettings(heartbeat_s=30)
DATABASES = {"orders": {"url_env": "ORDERS_DATABASE_URL"}}
SQL = {"kind": "sql", "database": "orders", "query": "SELECT count(*) FROM orders"}
LISTEN = {"kind": "listen", "database": "orders", "channel": "order_events", "timeout_s": 2}


def table(**sources: dict[str, object]) -> dict[str, object]:
    return {"heartbeat": {"timeout_s": 3, "databases": DATABASES, "sources": sources}}


def refused(config: dict[str, object], settings: AgentSettings = BEATING) -> str:
    with pytest.raises(AppError) as e:
        heartbeat_sources(config, settings, "app/owlclaw.toml")
    return str(e.value)


def test_sources_parse_with_their_database_and_time_limit() -> None:
    sources = heartbeat_sources(table(new_orders=SQL, events=LISTEN), BEATING)
    assert list(sources.sources) == ["new_orders", "events"]
    assert sources.url_envs == {
        "new_orders": "ORDERS_DATABASE_URL",
        "events": "ORDERS_DATABASE_URL",
    }
    assert sources.timeouts == {"new_orders": 3, "events": 2}
    assert not heartbeat_sources({}, AgentSettings())  # no table: no sources, heartbeat or not


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (table(x={**SQL, "kind": "redis"}), "unknown source kind 'redis'; known: listen, sql"),
        (table(x={"database": "orders"}), "[heartbeat.sources.x] kind is missing"),
        (
            table(x={**SQL, "database": "order"}),
            "unknown database 'order' (did you mean 'orders'?)",
        ),
        (table(x={**LISTEN, "channel": "no-dashes"}), "[heartbeat.sources.x] channel"),
        (table(x={**SQL, "querry": "x"}), "querry"),
        (table(x={**SQL, "timeout_s": 0}), "timeout_s"),
        (
            {"heartbeat": {"sources": {}, "timeout": 1}},
            "unknown key 'timeout' (did you mean 'timeout_s'?)",
        ),
        ({"heartbeat": {"databases": {"a": {"url": "postgresql://"}}}}, "url"),
    ],
)
def test_malformed_sources_are_refused_naming_the_key(
    config: dict[str, object], expected: str
) -> None:
    message = refused(config)
    assert message.startswith("app/owlclaw.toml: ") and expected in message


def test_sources_without_a_heartbeat_are_refused() -> None:
    assert "set [agent] heartbeat_s above 0" in refused(table(x=SQL), AgentSettings())


def test_an_unset_database_url_is_refused_and_the_url_is_a_secret() -> None:
    sources = heartbeat_sources(table(x=SQL), BEATING)
    with pytest.raises(AppError, match="url_env names ORDERS_DATABASE_URL, not set"):
        check_urls(sources, "app/owlclaw.toml", {})
    check_urls(sources, "app/owlclaw.toml", {"ORDERS_DATABASE_URL": "postgresql:///orders"})
    assert implicit(table(x=SQL))["ORDERS_DATABASE_URL"] == "[heartbeat.databases.orders] url_env"


def test_owlclaw_run_refuses_an_app_with_a_malformed_heartbeat_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDERS_DATABASE_URL", raising=False)
    toml = (
        "[agent]\nheartbeat_s = 5\n"
        '[heartbeat.databases.orders]\nurl_env = "ORDERS_DATABASE_URL"\n'
        '[heartbeat.sources.x]\nkind = "kafka"\n'
    )
    root = make_app(tmp_path / "app", config=toml)
    with pytest.raises(AppError, match=r"\[heartbeat.sources.x\] unknown source kind 'kafka'"):
        validate_app(root, load_timeout_s=30)
    listen = toml.replace('"kafka"', '"listen"\ndatabase = "orders"\nchannel = "c"')
    (root / "owlclaw.toml").write_text(listen)
    with pytest.raises(AppError, match="url_env names ORDERS_DATABASE_URL, not set"):
        validate_app(root, load_timeout_s=30)
    monkeypatch.setenv("ORDERS_DATABASE_URL", "postgresql://127.0.0.1:1/orders")
    assert validate_app(root, load_timeout_s=30).agent_id == "app"


def test_an_app_may_have_a_heartbeat_table(tmp_path: Path) -> None:
    toml = (
        '[agent]\nheartbeat_s = 5\n[heartbeat.databases.orders]\nurl_env = "ORDERS_DATABASE_URL"\n'
    )
    app = load_app(make_app(tmp_path / "app", config=toml))
    assert app.config["heartbeat"]["databases"] == DATABASES


results = st.builds(
    SourceResult,
    source=st.text(min_size=1, max_size=8),
    kind=st.sampled_from(["sql", "listen"]),
    count=st.integers(min_value=0, max_value=10**9),
    payloads=st.lists(st.text(max_size=3 * PAYLOAD_CHARS), max_size=3 * PAYLOADS_KEPT),
    error=st.none() | st.text(min_size=1, max_size=50),
)


@given(st.lists(results, max_size=6))
def test_only_sources_that_answered_a_count_wake_and_every_failure_is_listed(
    answers: list[SourceResult],
) -> None:
    payload = wake_payload(answers)
    woke = [a for a in answers if a.error is None and a.count > 0]
    assert [w["source"] for w in payload.get(WOKEN_BY, [])] == [a.source for a in woke]
    assert [w["count"] for w in payload.get(WOKEN_BY, [])] == [a.count for a in woke]
    assert [f["error"] for f in payload.get(FAILED, [])] == [a.error for a in answers if a.error]
    for shown in payload.get(WOKEN_BY, []):  # bounded, whatever arrived
        assert len(shown.get("payloads", [])) <= PAYLOADS_KEPT
        assert all(len(p) <= PAYLOAD_CHARS for p in shown.get("payloads", []))
    assert bool(payload) == any(a.woke or a.error for a in answers)


def test_a_source_that_fails_or_times_out_does_not_hold_up_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources = heartbeat_sources(
        table(down=SQL, deaf={**LISTEN, "timeout_s": 5}, slow={**SQL, "timeout_s": 0.05}), BEATING
    )
    real = checks_module.count_rows

    async def count_rows(url: str, query: str, timeout_s: float) -> int:
        if timeout_s < 1:  # the slow source's query never answers
            await asyncio.Event().wait()
        return await real(url, query, timeout_s)

    monkeypatch.setattr(checks_module, "count_rows", count_rows)
    checks = SourceChecks(sources, {"ORDERS_DATABASE_URL": "postgresql://127.0.0.1:1/nowhere"})

    async def beat() -> list[SourceResult]:
        try:
            return await checks.check()
        finally:
            await checks.close()

    down, deaf, slow = asyncio.run(beat())
    assert down.error is not None and down.error.startswith("OperationalError") and not down.woke
    assert deaf.error is not None and deaf.error.startswith("OperationalError") and not deaf.woke
    assert slow.error == "timed out after 0.05 s" and not slow.woke
    assert failures(wake_payload([slow])) == "source 'slow' failed: timed out after 0.05 s"


def test_a_source_whose_database_url_is_unset_fails_instead_of_reading_the_default() -> None:
    checks = SourceChecks(heartbeat_sources(table(sql=SQL, listen=LISTEN), BEATING), {})
    results = asyncio.run(checks.check())
    assert [r.error for r in results] == ["ORDERS_DATABASE_URL is unset"] * 2


def test_a_heartbeat_woken_by_a_source_runs_and_is_shown_why(ledger: Ledger) -> None:
    register_script(
        "orders", {"cases": [{"when": "new_orders", "steps": [{"content": "Handled."}]}]}
    )
    runtime = AgentRuntime(ledger, "clerk", models=["scripted/orders"])
    payload = wake_payload([SourceResult(source="new_orders", kind="sql", count=3)])
    woke = asyncio.run(runtime.run("heartbeat", payload=payload))
    assert woke.status == "completed"
    [started] = [e for e in run_events(ledger, woke) if isinstance(e, ev.RunStarted)]
    assert started.payload[WOKEN_BY] == [{"source": "new_orders", "kind": "sql", "count": 3}]
    [completed] = [e for e in run_events(ledger, woke) if isinstance(e, ev.RunCompleted)]
    assert completed.answer == "Handled."  # the case its payload chose: the model saw why


def test_a_heartbeat_whose_sources_failed_is_skipped_and_says_so(ledger: Ledger) -> None:
    runtime = AgentRuntime(ledger, "clerk", models=["scripted/orders"])
    failed = SourceResult.failed("slow", "sql", "timed out after 2 s")
    skipped = asyncio.run(runtime.run("heartbeat", payload=wake_payload([failed])))
    assert skipped.status == "skipped"
    events = run_events(ledger, skipped)
    assert not any(isinstance(e, ev.LLMResponded) for e in events)
    [end] = [e for e in events if isinstance(e, ev.RunSkipped)]
    assert end.reason == "heartbeat: no pending events; source 'slow' failed: timed out after 2 s"
    [started] = [e for e in events if isinstance(e, ev.RunStarted)]
    assert started.payload == {FAILED: [{"source": "slow", "kind": "sql", "error": failed.error}]}


def test_owlclaw_status_shows_each_source_as_its_last_beat_found_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = {
        "clerk": {
            "heartbeat_sources": {
                "new_orders": {"kind": "sql", "count": 2, "error": None},
                "slow": {"kind": "sql", "count": 0, "error": "timed out after 0.5 s [x]"},
            }
        }
    }
    report = {
        "server": {"url": "http://127.0.0.1:8765", "placement": "local", "timer_backend": "b"},
        "database": {"head": 1},
        "pending_timers": 0,
        "registered_agents": 1,
        "agents": [{**row, "runs_today": 0, "next_timer": None} for row in with_served([], served)],
        "projections": [],
    }
    console = Console(record=True, width=200)
    monkeypatch.setattr(status, "out", console)
    status._print_status(report)
    text = console.export_text()
    assert "heartbeat clerk new_orders (sql): 2" in text
    assert "heartbeat clerk slow (sql): failed: timed out after 0.5 s [x]" in text


@given(st.lists(results, max_size=4), st.booleans(), st.sampled_from(["heartbeat", "webhook"]))
def test_a_beat_is_idle_only_with_nothing_inbound_and_no_source_waking_it(
    answers: list[SourceResult], inbound: bool, trigger: str
) -> None:
    agent = Agent.blank(agent_stream_id("clerk"))
    agent.record(ev.AgentRegistered, agent_id="clerk")
    if inbound:
        agent.record(ev.InboundReceived, source="webhook")
    queued = agent.queue_run(trigger, payload=wake_payload(answers))
    woke = any(a.woke for a in answers)
    assert queued.idle == (trigger == "heartbeat" and not inbound and not woke)
