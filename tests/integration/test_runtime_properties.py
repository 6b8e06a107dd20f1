"""The 23 correctness properties of seed 001 (agent runtime), one Hypothesis test each.

Each test is named after its property and runs at least 100 examples; where a property touches
persistence it runs against the real ledger (and memory view) in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import string
import tempfile
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.streams import run_stream_id
from owlclaw.app import AppError, load_app, sanitize, select_skills
from owlclaw.config import ConfigError, RuntimeConfig, load_config
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.llm.tokens import token_counter
from owlclaw.messages import RunResult
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.context import HEADER, ContextItem, build_context
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from projections import MemoryStore, MemoryView, ProjectionRunner
from projections.embedders import Embedder
from projections.memory_files import render_memory_files
from tests.apps import make_app, skill

pytestmark = pytest.mark.integration

EXAMPLES = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TOOLS = sorted(BUILTINS)
words = st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=60).map(str.strip)
prose = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300
)


@pytest.fixture(scope="module")
def module_db(pg_server: Database) -> Iterator[Database]:
    name = f"p_{uuid.uuid4().hex[:12]}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def ledger(module_db: Database) -> Iterator[Ledger]:
    with Ledger(module_db.url) as led:
        yield led


@pytest.fixture(scope="module")
def memory(ledger: Ledger, local_embedder: Embedder) -> Iterator[MemoryStore]:
    view = MemoryView(ledger, embedder=local_embedder)
    view.create_table()
    runner = ProjectionRunner(ledger, view).start()
    yield MemoryStore(view)
    runner.stop()


@pytest.fixture(scope="module")
def warm(ledger: Ledger) -> None:
    """One run before the timing properties, so litellm's one-time set-up is not inside one."""
    register_script("warm", [{"content": "ok"}])
    runtime = AgentRuntime(ledger, "warm-up", models=["scripted/warm"])
    asyncio.run(runtime.run("webhook"))
    runtime.close()


def new_agent() -> str:
    return f"a{uuid.uuid4().hex[:10]}"


def play(
    runtime: AgentRuntime, steps: list[Any], trigger: str = "webhook", **script: Any
) -> RunResult:
    name = uuid.uuid4().hex[:10]
    register_script(name, {"steps": steps, **script})
    runtime.models = [f"scripted/{name}"]
    return asyncio.run(runtime.run(trigger, focus="property"))


def run_events(ledger: Ledger, result: RunResult) -> list[ev.LedgerEvent]:
    return ledger.stream(uuid.UUID(result.run_id))


def decide(i: int) -> dict[str, Any]:
    args = {"reasoning": f"step {i}", "decision_type": "other"}
    return {"tool_calls": [{"name": "log_decision", "arguments": args}]}


# --- identity ------------------------------------------------------------------------------


@EXAMPLES
@given(soul=prose, identity=prose)
def test_property_1_identity_files_load_completely(
    ledger: Ledger, soul: str, identity: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = load_app(make_app(Path(tmp), soul=soul, identity=identity))
        runtime = AgentRuntime(ledger, new_agent(), models=["x"], app=app)
        prompt = asyncio.run(runtime.briefing.system_prompt(None, "webhook"))
    assert app.soul == sanitize(soul) and app.identity == sanitize(identity)
    assert app.soul in prompt.text and app.identity in prompt.text


@EXAMPLES
@given(missing=st.sampled_from(["SOUL.md", "IDENTITY.md"]), others=st.booleans())
def test_property_2_missing_identity_file_is_a_clear_error(missing: str, others: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = make_app(Path(tmp), {"s": skill("s")} if others else None)
        (root / missing).unlink()
        with pytest.raises(AppError) as raised:
            load_app(root)
    assert missing in str(raised.value) and str(root) in str(raised.value)


@EXAMPLES
@given(versions=st.lists(words, min_size=1, max_size=3, unique=True))
def test_property_3_hot_reload_uses_the_new_identity(ledger: Ledger, versions: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = make_app(Path(tmp), soul="# Soul\nfirst version\n")
        runtime = AgentRuntime(ledger, new_agent(), models=["x"], app=load_app(root))
        for version in versions:
            (root / "SOUL.md").write_text(f"# Soul\n{version}\n")
            result = play(runtime, [{"content": "ok"}])
            [response] = [e for e in run_events(ledger, result) if isinstance(e, ev.LLMResponded)]
            assert response.inputs["soul_sha256"] == load_app(root).soul_sha256
            assert f"\n{version}\n" in asyncio.run(runtime.briefing.system_prompt(None, "x")).text
        runtime.close()
    loaded = ledger.stream(ledger.load_agent(runtime.agent_id).id)
    assert sum(isinstance(e, ev.IdentityLoaded) for e in loaded) == len(versions)


# --- short-term context ----------------------------------------------------------------------

tokens = token_counter("scripted/demo")

items_strategy = st.lists(
    st.tuples(st.text(max_size=400), st.integers(min_value=1, max_value=3)), max_size=40
).map(lambda xs: [ContextItem(f"#{i} {t}", imp, i) for i, (t, imp) in enumerate(xs)])


@EXAMPLES
@given(items=items_strategy, budget=st.integers(min_value=0, max_value=3000))
def test_property_4_short_term_context_stays_within_its_token_budget(
    items: list[ContextItem], budget: int
) -> None:
    assert tokens(build_context(items, budget, tokens)) <= budget


@EXAMPLES
@given(items=items_strategy.filter(lambda xs: len(xs) >= 2), data=st.data())
def test_property_5_compression_keeps_the_most_important_recent_items(
    items: list[ContextItem], data: st.DataObject
) -> None:
    needed = tokens(build_context(items, 10**9, tokens))
    budget = data.draw(st.integers(min_value=0, max_value=needed - 1), label="budget")
    text = build_context(items, budget, tokens)
    assert tokens(text) <= budget
    kept_ids = {int(m) for m in re.findall(r"^- #(\d+) ", text, flags=re.MULTILINE)}
    kept = [i for i in items if i.order in kept_ids]
    dropped = [i for i in items if i.order not in kept_ids]
    assert dropped  # over budget: something was compressed away
    rank = {i.order: (i.importance, i.order) for i in items}
    if kept:
        assert min(rank[i.order] for i in kept) > max(rank[i.order] for i in dropped)
        assert f"({len(dropped)} earlier items omitted)" in text
        assert text.startswith(HEADER)


# --- long-term memory ------------------------------------------------------------------------


@EXAMPLES
@given(
    content=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=1,
        max_size=2000,
    ).filter(str.strip),
    tags=st.lists(words.filter(bool), max_size=3),
)
def test_property_6_remember_round_trips_to_memory_md_and_recall(
    ledger: Ledger, memory: MemoryStore, content: str, tags: list[str]
) -> None:
    agent = new_agent()
    runtime = AgentRuntime(ledger, agent, models=["x"], memory=memory)
    args = {"content": content, "tags": tags}
    result = play(runtime, [{"tool_calls": [{"name": "remember", "arguments": args}]}])
    [remembered] = [e for e in run_events(ledger, result) if isinstance(e, ev.MemoryRemembered)]
    assert memory.wait_for(ledger.log.last_committed(), timeout=30)
    [found] = memory.recall(agent, content, limit=5).memories
    assert (found.memory_id, found.content, found.tags) == (remembered.memory_id, content, tags)
    with tempfile.TemporaryDirectory() as tmp:
        memory_md, _ = render_memory_files(memory.view, agent, Path(tmp))
        assert content in memory_md.read_bytes().decode()
    runtime.close()


@EXAMPLES
@given(
    contents=st.lists(
        words.map(lambda w: " ".join(w.lower().split())).filter(lambda w: len(w) > 3),
        min_size=2,
        max_size=5,
        unique=True,
    ),
    ages_days=st.lists(st.floats(min_value=0, max_value=120), min_size=5, max_size=5),
    pick=st.integers(min_value=0, max_value=4),
)
def test_property_7_recall_ranks_by_similarity_weighted_by_age(
    ledger: Ledger,
    memory: MemoryStore,
    contents: list[str],
    ages_days: list[float],
    pick: int,
) -> None:
    from datetime import UTC, datetime, timedelta

    agent = new_agent()
    run = run_stream_id(agent, 1)
    now = datetime.now(UTC)
    events = [
        ev.MemoryRemembered(
            originator_id=run,
            originator_version=i + 1,
            timestamp=now - timedelta(days=ages_days[i]),
            agent_id=agent,
            memory_id=uuid.uuid4(),
            content=c,
        )
        for i, c in enumerate(contents)
    ]
    ledger.append_events(events)
    assert memory.wait_for(ledger.log.last_committed(), timeout=30)
    query = contents[pick % len(contents)]
    recalled = memory.recall(agent, query, limit=20, now=now).memories
    assert len(recalled) == len(contents)
    relevance = [m.relevance for m in recalled]
    assert relevance == sorted(relevance, reverse=True)
    for m in recalled:
        age = (now - m.created_at).total_seconds() / 86400
        assert m.relevance == pytest.approx(m.similarity * 0.5 ** (age / 30), abs=2e-6)
    assert max(recalled, key=lambda m: m.similarity).content == query


@pytest.fixture(scope="module")
def small_memory(pg_server: Database, local_embedder: Embedder) -> Iterator[tuple[Ledger, Any]]:
    """A ledger whose memory view archives beyond 2 KB per agent."""
    name = f"p_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    with Ledger(db.url) as led:
        view = MemoryView(led, embedder=local_embedder, size_limit=2048)
        view.create_table()
        yield led, view
    pg_server.drop_database(name)


@EXAMPLES
@given(sizes=st.lists(st.integers(min_value=1, max_value=900), min_size=1, max_size=12))
def test_property_8_memory_md_is_archived_within_its_size_limit(
    small_memory: tuple[Ledger, MemoryView], sizes: list[int]
) -> None:
    led, view = small_memory
    limit = view.size_limit
    agent = new_agent()
    run = run_stream_id(agent, 1)
    led.append_events(
        [
            ev.MemoryRemembered(
                originator_id=run,
                originator_version=i + 1,
                timestamp=ev_time(i),
                agent_id=agent,
                memory_id=uuid.uuid4(),
                content="m" * size,
            )
            for i, size in enumerate(sizes)
        ]
    )
    ProjectionRunner(led, view).catch_up()
    with tempfile.TemporaryDirectory() as tmp:
        memory_md, archive = render_memory_files(view, agent, Path(tmp))
        header = len(f"# MEMORY.md — {agent}\n\n".encode()) + 80
        active = memory_md.read_bytes()
        archived = archive.read_text(encoding="utf-8")
    assert len(active) <= limit + header
    newest = "m" * sizes[-1]
    assert f"\n{newest}\n" in active.decode()  # the newest memory is never the one archived
    entries = active.decode().count(" · ") + archived.count(" · ")
    assert entries == len(sizes)  # nothing lost: every memory is active or archived


def ev_time(i: int) -> Any:
    from datetime import UTC, datetime, timedelta

    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i)


# --- skills ----------------------------------------------------------------------------------

frontmatter = st.one_of(
    st.builds(skill, st.from_regex(r"[a-z]{3,12}-skill", fullmatch=True)),
    st.text(max_size=200).map(lambda t: f"---\n{t}\n---\nbody\n"),
    st.text(max_size=200),
)


@EXAMPLES
@given(texts=st.lists(frontmatter, min_size=1, max_size=4))
def test_property_9_skill_frontmatter_is_validated_and_bad_skills_skipped(
    texts: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = make_app(Path(tmp), {f"dir{i}": t for i, t in enumerate(texts)})
        app = load_app(root)
        for i, text in enumerate(texts):
            loaded = any(s.path.parent.name == f"dir{i}" for s in app.skills.values())
            warned = any(w.startswith(f"skipped skill dir{i}:") for w in app.warnings)
            assert loaded != warned  # each skill either loads or is skipped with a warning
            valid = text.startswith("---\nname: ") and text.endswith(
                "-skill skill\nowlclaw:\n  task_type: monitor\n---\nHow to check entries.\n"
            )
            if valid and texts.index(text) == i:  # a valid skill with a name not seen before
                assert loaded


@EXAMPLES
@given(
    bodies=st.lists(st.integers(min_value=0, max_value=20_000), min_size=1, max_size=6),
    budget=st.integers(min_value=0, max_value=6000),
)
def test_property_10_skills_in_the_prompt_stay_within_the_token_budget(
    bodies: list[int], budget: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        skills = {f"s{i}": skill(f"s{i}", body="b" * n) for i, n in enumerate(bodies)}
        app = load_app(make_app(Path(tmp), skills))
        chosen = select_skills(app, None, budget, tokens)
        assert sum(tokens(s.body()) for s in chosen) <= budget
        fitting = [s for s in app.skills.values() if tokens(s.body()) <= budget]
        assert bool(chosen) == bool(fitting)


# --- decision loop limits --------------------------------------------------------------------


@EXAMPLES
@given(limit=st.integers(min_value=1, max_value=8), steps=st.integers(min_value=0, max_value=12))
def test_property_11_function_calls_never_exceed_the_limit(
    ledger: Ledger, limit: int, steps: int
) -> None:
    runtime = AgentRuntime(
        ledger, new_agent(), models=["x"], limits=RuntimeConfig(max_function_calls=limit)
    )
    result = play(runtime, [decide(i) for i in range(steps)])
    runtime.close()
    events = run_events(ledger, result)
    requested = sum(isinstance(e, ev.ToolCallRequested) for e in events)
    assert requested == result.tool_calls == min(steps, limit)
    if steps > limit:
        [ended] = [e for e in events if isinstance(e, ev.RunTerminated)]
        assert f"limit of {limit} function calls" in ended.reason
    else:
        assert result.status == "completed"


@EXAMPLES
@given(timeout=st.floats(min_value=0.05, max_value=0.1), slow=st.booleans())
def test_property_12_llm_calls_time_out(
    ledger: Ledger, warm: None, timeout: float, slow: bool
) -> None:
    """A call slower than its limit times out; one that answers at once completes, under a
    limit (60 s) that a loaded machine meets, not under the slow call's 50-100 ms."""
    limit = timeout if slow else 60.0
    runtime = AgentRuntime(
        ledger, new_agent(), models=["x"], limits=RuntimeConfig(llm_timeout_s=limit)
    )
    result = play(runtime, [{"content": "ok"}], latency_s=timeout * 3 if slow else 0.0)
    runtime.close()
    if slow:
        [failed] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunFailed)]
        assert result.status == "failed" and "Timeout" in failed.error
        assert result.iterations == 0
    else:
        assert result.status == "completed" and result.iterations == 1


@EXAMPLES
@given(
    allow=st.lists(st.sampled_from(TOOLS), unique=True),
    deny=st.lists(st.sampled_from(TOOLS), unique=True),
)
def test_property_13_visibility_filtering_is_recorded_with_reasons(
    ledger: Ledger, allow: list[str], deny: list[str]
) -> None:
    governance = Governance(allow=tuple(allow), deny=tuple(deny))
    runtime = AgentRuntime(ledger, new_agent(), models=["x"], governance=governance)
    result = play(runtime, [{"content": "ok"}])
    runtime.close()
    [resolved] = [e for e in run_events(ledger, result) if isinstance(e, ev.VisibleToolsResolved)]
    expected = [t for t in BUILTINS if t not in deny and (not allow or t in allow)]
    assert resolved.tools == expected
    assert set(resolved.filtered) == set(BUILTINS) - set(expected)
    for tool, reason in resolved.filtered.items():
        assert reason == (
            "denied by governance.deny" if tool in deny else "not in governance.allow"
        )


# --- heartbeat -------------------------------------------------------------------------------


@EXAMPLES
@given(earlier_runs=st.integers(min_value=0, max_value=2))
def test_property_14_heartbeat_without_pending_events_skips_the_model(
    ledger: Ledger, earlier_runs: int
) -> None:
    runtime = AgentRuntime(ledger, new_agent(), models=["x"])
    for _ in range(earlier_runs):
        play(runtime, [{"content": "ok"}])
    result = play(runtime, [{"content": "should not be asked"}], trigger="heartbeat")
    runtime.close()
    events = run_events(ledger, result)
    assert result.status == "skipped" and result.iterations == 0
    assert not any(isinstance(e, ev.LLMResponded) for e in events)


@EXAMPLES
@given(pending=st.integers(min_value=1, max_value=4))
def test_property_15_heartbeat_with_pending_events_runs_the_model(
    ledger: Ledger, pending: int
) -> None:
    agent_id = new_agent()
    agent = ledger.register_agent(agent_id)
    for i in range(pending):
        agent.record(ev.InboundReceived, source="webhook", payload={"n": i})
    ledger.append(agent)
    runtime = AgentRuntime(ledger, agent_id, models=["x"])
    result = play(runtime, [{"content": "handled"}], trigger="heartbeat")
    runtime.close()
    assert result.status == "completed" and result.iterations == 1
    assert ledger.load_agent(agent_id).state.pending_inbound == 0


@EXAMPLES
@given(run_timeout=st.floats(min_value=0.05, max_value=0.12), slow=st.booleans())
def test_property_16_runs_time_out(
    ledger: Ledger, warm: None, run_timeout: float, slow: bool
) -> None:
    """A run whose model takes twice its time limit times out; one with a limit far above
    anything a loaded machine needs completes. The fast case gets 60 s, not the slow case's
    tenth of a second: a run of real commits on a loaded CI machine can take that long, and the
    property is about the limit, not the machine's speed."""
    limit = run_timeout if slow else 60.0
    runtime = AgentRuntime(
        ledger, new_agent(), models=["x"], limits=RuntimeConfig(run_timeout_s=limit)
    )
    steps = [decide(i) for i in range(6 if slow else 0)]
    result = play(runtime, steps, latency_s=run_timeout / 3 if slow else 0.0)
    runtime.close()
    if slow:
        [ended] = [e for e in run_events(ledger, result) if isinstance(e, ev.RunTimedOut)]
        assert result.status == "timedout" and ended.timeout_s == run_timeout
    else:
        assert result.status == "completed"


# --- property 17 (timer task retries) lives with the timer service ---------------------------


@EXAMPLES
@given(
    prompt_tokens=st.integers(min_value=0, max_value=10_000),
    completion_tokens=st.integers(min_value=0, max_value=10_000),
    steps=st.integers(min_value=0, max_value=3),
)
def test_property_18_token_usage_is_recorded_per_llm_call(
    ledger: Ledger, prompt_tokens: int, completion_tokens: int, steps: int
) -> None:
    runtime = AgentRuntime(ledger, new_agent(), models=["x"])
    result = play(
        runtime,
        [decide(i) for i in range(steps)],
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    runtime.close()
    responses = [e for e in run_events(ledger, result) if isinstance(e, ev.LLMResponded)]
    assert len(responses) == steps + 1
    for r in responses:
        assert r.usage == {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    total = (steps + 1) * (prompt_tokens + completion_tokens)
    assert result.tokens == total
    assert ledger.load_run(uuid.UUID(result.run_id)).state.tokens == total


@pytest.fixture(scope="module")
def broken_memory(pg_server: Database, local_embedder: Embedder) -> Iterator[MemoryStore]:
    """A memory store over a database without its tables: every query fails."""
    name = f"p_{uuid.uuid4().hex[:12]}"
    db = pg_server.create_database(name)
    with Ledger(db.url) as ledger:
        yield MemoryStore(MemoryView(ledger, embedder=local_embedder))
    pg_server.drop_database(name)


@EXAMPLES
@given(query=words.filter(bool))
def test_property_20_recall_degrades_to_empty_when_the_vector_store_fails(
    ledger: Ledger, broken_memory: MemoryStore, query: str
) -> None:
    runtime = AgentRuntime(ledger, new_agent(), models=["x"], memory=broken_memory)
    call = {"name": "recall", "arguments": {"query": query}}
    result = play(runtime, [{"tool_calls": [call]}, {"content": "ok"}])
    runtime.close()
    events = run_events(ledger, result)
    [outcome] = [e for e in events if isinstance(e, ev.ToolCallSucceeded)]
    assert outcome.result["memories"] == [] and "unavailable" in outcome.result["warning"]
    assert any(isinstance(e, ev.RunWarning) for e in events)
    assert result.status == "completed"


@EXAMPLES
@given(
    error=st.sampled_from([ValueError, KeyError, RuntimeError, ZeroDivisionError, OSError]),
    message=words,
)
def test_property_21_tool_errors_go_back_to_the_model(
    ledger: Ledger, error: type[Exception], message: str
) -> None:
    registry = Registry()

    @registry.capability("Always fails.")
    def fragile(symbol: str) -> dict[str, Any]:
        raise error(message)

    runtime = AgentRuntime(ledger, new_agent(), models=["x"], registry=registry)
    call = {"name": "fragile", "arguments": {"symbol": "X"}}
    result = play(runtime, [{"tool_calls": [call]}, {"content": "recovered"}])
    runtime.close()
    events = run_events(ledger, result)
    [failed] = [e for e in events if isinstance(e, ev.ToolCallFailed)]
    assert failed.error.startswith(error.__name__) and failed.error_code == "TOOL_FAILED"
    assert result.status == "completed" and result.iterations == 2  # the model decided again


# --- configuration and sanitisation ----------------------------------------------------------

BAD_VALUES = {
    "LLM_TIMEOUT_S": ["-1", "0", "abc", "1e9"],
    "RUN_TIMEOUT_S": ["-5", "0", "x", "-0.1"],
    "MAX_FUNCTION_CALLS": ["0", "-3", "1.5", "many", "100000"],
    "SNAPSHOT_INTERVAL": ["1", "0", "-1", "ten"],
    "CONTEXT_TOKENS": ["-1", "1000000", "lots"],
    "MEMORY_HALF_LIFE_DAYS": ["0", "-2", "never"],
}


@EXAMPLES
@given(
    setting=st.sampled_from(sorted(BAD_VALUES)).flatmap(
        lambda v: st.tuples(st.just(v), st.sampled_from(BAD_VALUES[v]))
    ),
    in_file=st.booleans(),
    calls=st.integers(max_value=0),
)
def test_property_22_invalid_configuration_is_rejected_at_start(
    setting: tuple[str, str], in_file: bool, calls: int
) -> None:
    from owlclaw.config import ENV_FIELDS

    variable, value = setting
    section, field = (None, *ENV_FIELDS[variable])[-2:]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "owlclaw.toml"
        environ = {f"OWLCLAW_{variable}": value}
        if in_file:
            quoted = value if re.fullmatch(r"-?[0-9.e]+", value) else f'"{value}"'
            path.write_text(f"[{section}]\n{field} = {quoted}\n" if section else "")
            environ = {} if section else environ
        with pytest.raises(ConfigError) as raised:
            load_config(path, environ)
    assert field in str(raised.value)
    with pytest.raises(ValueError, match="rate_limits"):
        Governance.from_app_config(
            {"governance": {"rate_limits": {"x": {"calls": calls, "per_seconds": 1}}}}
        )


injection = st.lists(
    st.one_of(
        st.sampled_from(["<script>", "<SCRIPT src=x>", "</script>", "${HOME}", "\u200b", "\u202e"]),
        st.characters(blacklist_categories=("Cs",)),
        st.text(max_size=20),
    ),
    max_size=30,
).map("".join)


@EXAMPLES
@given(soul=injection, identity=injection, body=injection)
def test_property_23_content_loaded_from_files_is_sanitised(
    soul: str, identity: str, body: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = load_app(
            make_app(Path(tmp), {"s": skill("s", body=body)}, soul=soul, identity=identity)
        )
        texts = [app.soul, app.identity, *(s.body() for s in app.skills.values())]
    for text in texts:
        assert "<script" not in text.lower() and "${" not in text
        assert all(ch in "\n\t" or unicodedata.category(ch) not in {"Cc", "Cf"} for ch in text)
