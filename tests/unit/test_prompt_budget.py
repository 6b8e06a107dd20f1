"""The system prompt within its token budget (seed 001): parts trimmed in the documented order
until the whole fits, the core never trimmed (an app whose core alone is over is refused), and
what was left out recorded in the run's inputs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.agent_state import ActiveSchedule
from owlclaw.app import AppError
from owlclaw.config import RuntimeConfig
from owlclaw.llm.tokens import token_counter
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.prompt import system_prompt
from owlclaw.runtime.prompt_budget import ORDER, SEPARATOR, Part, PromptTooLarge, fit
from owlclaw.server.validation import validate_app
from projections.recall import RecallResult
from projections.relevance import Memory
from tests.apps import make_app, skill
from tests.scripted import agent_events, play, run_events

NAMES = (
    "inbound",
    "schedules",
    "memories",
    "recent_activity",
    "skill_descriptions",
    "skill_bodies",
)
NAMES_ONLY = "- names"
"""What the skill index shows once its descriptions are trimmed (core: never trimmed)."""


def part(name: str, sizes: list[int]) -> Part:
    """Items of ``sizes`` characters; the count is the length, so counts add up exactly."""

    def render(keep: dict[str, int]) -> str | None:
        if name == "skill_descriptions" and sizes and not keep[name]:
            return NAMES_ONLY
        return "\n".join("x" * n for n in sizes[: keep[name]]) or None

    return Part(name, [f"{name}{i}" for i in range(len(sizes))], render)


sizes = st.lists(st.integers(min_value=1, max_value=300), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    core=st.integers(min_value=1, max_value=2000),
    parts=st.fixed_dictionaries(dict.fromkeys(NAMES, sizes)),
    budget=st.integers(min_value=1, max_value=4000),
)
def test_the_prompt_fits_when_its_core_does_and_trims_in_order(
    core: int, parts: dict[str, list[int]], budget: int
) -> None:
    given_parts = [part(n, s) for n, s in parts.items()]
    full = SEPARATOR.join(
        ["c" * core, *(t for p in given_parts if (t := p.render(dict.fromkeys(NAMES, 10**6))))]
    )
    names_only = len(SEPARATOR) + len(NAMES_ONLY) if parts["skill_descriptions"] else 0
    if core + names_only > budget:
        with pytest.raises(PromptTooLarge, match=r"runtime\.prompt_tokens"):
            fit(["c" * core], given_parts, budget, len)
        return
    fitted = fit(["c" * core], given_parts, budget, len)
    assert fitted.tokens == len(fitted.text) <= budget
    assert fitted.text.startswith("c" * core)
    assert bool(fitted.trimmed) == (len(full) > budget)  # nothing trimmed that fitted
    kept = {p.name: len(p.items) - len(fitted.trimmed.get(p.name, [])) for p in given_parts}
    for later, (name, floor, _) in enumerate(ORDER):
        previous_floor = min((f for n, f, _ in ORDER[:later] if n == name), default=10**6)
        if kept[name] < min(previous_floor, len(parts[name])):  # this step trimmed
            for before, floor_before, _ in ORDER[:later]:  # every earlier step done in full
                assert kept[before] <= floor_before
        assert kept[name] >= 0 and floor >= 0
    assert list(fitted.trimmed) == [
        n for n in dict.fromkeys(n for n, _, _ in ORDER) if n in fitted.trimmed
    ]


def test_memories_beyond_the_first_three_go_first_and_the_last_skill_body_before_the_others() -> (
    None
):
    parts = [part("memories", [50] * 6), part("skill_bodies", [100, 100, 100])]
    fitted = fit(["core"], parts, 4 + 2 + 3 * 50 + 2 + 2 + 2 * 100 + 1 + 5, len)
    assert fitted.trimmed == {
        "memories": ["memories3", "memories4", "memories5"],
        "skill_bodies": ["skill_bodies2"],
    }


def test_the_whole_text_has_the_last_word_when_part_counts_do_not_add_up() -> None:
    """A tokenizer may merge across parts: the whole count decides, so the result fits."""
    parts = [part("schedules", [10]), part("inbound", [10])]
    count = lambda text: len(text) + (50 if "\n\n" in text else 0)  # noqa: E731 - a test's tokenizer
    fitted = fit(["core"], parts, 30, count)
    assert fitted.tokens <= 30
    assert fitted.trimmed == {"schedules": ["schedules0"], "inbound": ["inbound0"]}


def inbound(n: int) -> list[ev.LedgerEvent]:
    return [
        ev.InboundReceived(
            originator_id=uuid.uuid4(),
            originator_version=i + 1,
            timestamp=datetime(2026, 1, 1, tzinfo=UTC),
            source="feed",
            payload={"note": f"event {i} " + "lorem ipsum " * 30},
        )
        for i in range(n)
    ]


def memories(n: int) -> RecallResult:
    return RecallResult(
        [
            Memory(uuid.uuid4(), "remembered " * 60, [], datetime(2026, 1, 1, tzinfo=UTC), 1, 1, 1)
            for _ in range(n)
        ]
    )


def test_a_run_prompt_over_budget_is_trimmed_counted_with_the_tokenizer_and_recorded() -> None:
    count = token_counter("scripted/demo")
    schedules = {
        f"s{i}": ActiveSchedule(
            "once", "check " * 20, fire_at=datetime.now(UTC) + timedelta(hours=i)
        )
        for i in range(1, 6)
    }
    events = inbound(8)
    prompt = asyncio.run(
        system_prompt(
            None,
            RuntimeConfig(prompt_tokens=1000),
            [[("decided (entry): wait for the close " * 5, 3)] * 4],
            None,
            "heartbeat",
            schedules=schedules,
            inbound=events,
            recalled=memories(6),
        )
    )
    assert prompt.inputs["prompt_tokens"] == count(prompt.text) <= 1000
    trimmed = prompt.inputs["trimmed"]
    assert list(trimmed)[:3] == ["memories", "recent_activity", "schedules"]
    assert trimmed["schedules"] == ["s1", "s2", "s3", "s4", "s5"]
    assert "schedules" not in prompt.inputs and "## Your active schedules" not in prompt.text
    shown = prompt.inputs.get("inbound", [])
    assert sorted([*shown, *trimmed.get("inbound", [])]) == list(range(1, 9))
    assert all(v > max(trimmed.get("inbound", [0])) for v in shown)  # the oldest go first
    assert len(prompt.inputs["memories"]) == 6  # what recall found, trimmed or not


def test_a_prompt_within_budget_is_not_trimmed() -> None:
    prompt = asyncio.run(system_prompt(None, RuntimeConfig(), [], None, "webhook"))
    assert "trimmed" not in prompt.inputs
    assert 0 < prompt.inputs["prompt_tokens"] < 100


def test_an_app_whose_core_exceeds_the_budget_is_refused_at_load(tmp_path: Path) -> None:
    root = make_app(tmp_path / "wordy", soul="Be careful and thorough. " * 350)
    limits = RuntimeConfig(prompt_tokens=1000)
    with pytest.raises(
        AppError, match=r"SOUL\.md, IDENTITY\.md and the skill names come to \d+ tokens"
    ):
        validate_app(root, load_timeout_s=30, limits=limits)
    fine = make_app(tmp_path / "brief", {"alpha": skill("alpha", "x " * 3000)})
    assert validate_app(fine, load_timeout_s=30, limits=limits).agent_id == "brief"


@pytest.mark.parametrize("value", [0, 999, 2_000_000])
def test_a_nonsense_budget_is_refused(value: int) -> None:
    with pytest.raises(msgspec.ValidationError, match="prompt_tokens"):
        msgspec.convert({"prompt_tokens": value}, RuntimeConfig)


def test_a_reloaded_core_over_the_budget_keeps_the_previous_identity(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "app", soul="# Soul\nBrief.\n")
    limits = RuntimeConfig(prompt_tokens=1000)
    runtime = AgentRuntime(ledger, "growing", models=["x"], app_dir=root, limits=limits)
    play(runtime, [{"content": "hi"}])
    (root / "SOUL.md").write_text("Be careful and thorough. " * 350)  # ~1,750 tokens
    result = play(runtime, [{"content": "hi"}])
    [warning] = [e for e in agent_events(ledger, "growing") if isinstance(e, ev.AgentWarning)]
    assert "kept the previous identity" in warning.message
    assert "runtime.prompt_tokens" in warning.message
    [response] = [e for e in run_events(ledger, result) if isinstance(e, ev.LLMResponded)]
    assert response.inputs["prompt_tokens"] <= 1000
