"""How ``replay --verify`` lines a replay up with its record (numbered as the listing numbers
the recorded events), and how the recording tells which executions of a call a stop cut off."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from events import catalog as ev
from owlclaw.audit.verify import compare
from owlclaw.runtime.recorded import RecordedRun

AT = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def stream(*steps: tuple[type[ev.LedgerEvent], dict[str, Any]]) -> list[ev.LedgerEvent]:
    """Events of one run stream, versions from 1 as the ledger numbers them."""
    run_id = uuid.uuid4()
    return [
        kind(originator_id=run_id, originator_version=n, timestamp=AT, **fields)
        for n, (kind, fields) in enumerate(steps, 1)
    ]


def calls(*names: str) -> tuple[type[ev.LedgerEvent], dict[str, Any]]:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": '{"s": "A"}'}}
        for i, n in enumerate(names, 1)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return (ev.LLMResponded, {"model": "m", "message": message})


START = (ev.RunStarted, {"agent_id": "a", "run_no": 1, "trigger": "webhook"})
VISIBLE = (ev.VisibleToolsResolved, {"tools": ["quote"]})
REQUESTED = (ev.ToolCallRequested, {"call_id": "c1", "tool": "quote", "arguments": {"s": "A"}})
STOPPED = (ev.RunInterrupted, {"reason": "the process running it stopped"})
RESUMED = (ev.RunResumed, {"from_version": 4})
UNKNOWN = (ev.ToolOutcomeUnknown, {"call_id": "c1", "tool": "quote", "reason": "stopped"})
ANSWER = (ev.LLMResponded, {"model": "m", "message": {"role": "assistant", "content": "ok"}})
DONE = (ev.RunCompleted, {"answer": "ok"})


def test_a_different_step_shows_both_sides_under_the_recorded_events_version() -> None:
    recorded = stream(START, VISIBLE, calls("quote"), REQUESTED, STOPPED, RESUMED, UNKNOWN, DONE)
    failed = {"call_id": "c1", "tool": "quote", "error": "?", "error_code": "OUTCOME_UNKNOWN"}
    replayed = stream(START, VISIBLE, calls("quote"), REQUESTED, (ev.ToolCallFailed, failed), DONE)
    [difference] = compare(recorded, replayed)
    assert difference.step == 7  # the listing's number of the ToolOutcomeUnknown
    assert str(difference) == (
        "step 7 (ToolOutcomeUnknown)\n"
        "  recorded: tool quote: outcome unknown\n"
        "  replay:   tool quote: failed OUTCOME_UNKNOWN"
    )


def test_a_rate_limited_call_is_the_same_step_whenever_it_says_to_retry() -> None:
    def limited(
        retry_s: str, code: str | None = "RATE_LIMITED"
    ) -> tuple[type[ev.LedgerEvent], dict[str, Any]]:
        reason = f"rate limit: quote allows 1 calls per 3600 s; retry in {retry_s} s"
        fields = {"call_id": "c1", "tool": "quote", "reason": reason, "error_code": code}
        return (ev.ToolCallDenied, fields)

    recorded = stream(START, VISIBLE, calls("quote"), limited("3599.9"), DONE)
    assert compare(recorded, stream(START, VISIBLE, calls("quote"), limited("3600.0"), DONE)) == []
    denied = stream(START, VISIBLE, calls("quote"), limited("3600.0", code=None), DONE)
    [difference] = compare(recorded, denied)  # denied for another reason: its words compared
    assert difference.step == 4


def test_a_step_only_one_side_took_is_one_difference_not_a_shift_of_the_rest() -> None:
    succeeded = (ev.ToolCallSucceeded, {"call_id": "c1", "tool": "quote", "result": {"p": 1}})
    recorded = stream(START, VISIBLE, calls("quote"), REQUESTED, succeeded, ANSWER, DONE)
    rejected = (ev.ToolCallRejected, {"call_id": "c0", "tool": "quote", "error": "bad s"})
    replayed = stream(START, VISIBLE, calls("quote"), rejected, REQUESTED, succeeded, ANSWER, DONE)
    [extra] = compare(recorded, replayed)
    assert (extra.step, extra.recorded) == (3, None)
    assert str(extra).splitlines() == [
        "after step 3: a step the record does not have (ToolCallRejected)",
        "  recorded: (no such step)",
        "  replay:   tool quote: rejected, bad s",
    ]
    [missing] = compare(replayed, recorded)
    assert (missing.step, missing.replay) == (4, None)
    assert missing.recorded is not None and missing.recorded.kind == "ToolCallRejected"


def test_steps_whose_words_are_cut_alike_show_all_that_was_compared() -> None:
    long = "x" * 400
    recorded = stream(START, (ev.RunCompleted, {"answer": long + "a"}))
    replayed = stream(START, (ev.RunCompleted, {"answer": long + "b"}))
    [difference] = compare(recorded, replayed)
    recorded_side, replay_side = str(difference).splitlines()[1:]
    assert recorded_side.endswith('a"]') and replay_side.endswith('b"]')


def test_the_executions_of_a_call_a_stop_cut_off() -> None:
    decided = (ev.DecisionLogged, {"decision_type": "other", "reasoning": "r", "call_id": "c1"})
    succeeded = (ev.ToolCallSucceeded, {"call_id": "c1", "tool": "quote", "result": 1})
    run_again = RecordedRun(
        uuid.uuid4(),
        stream(START, calls("quote"), REQUESTED, STOPPED, RESUMED, UNKNOWN, decided, succeeded),
    )
    [stopped, again] = run_again.executions("c1")
    assert stopped is None and isinstance(again, ev.ToolCallSucceeded)

    # not run again: a later stop is another step's
    second = (ev.ToolCallRequested, {"call_id": "c2", "tool": "quote", "arguments": {}})
    not_again = RecordedRun(
        uuid.uuid4(),
        stream(START, calls("quote"), REQUESTED, STOPPED, RESUMED, UNKNOWN, ANSWER, STOPPED),
    )
    assert not_again.executions("c1") == [None]
    later = RecordedRun(
        uuid.uuid4(), stream(START, calls("quote"), REQUESTED, succeeded, second, STOPPED)
    )
    assert [type(e) for e in later.executions("c1")] == [ev.ToolCallSucceeded]
    assert later.executions("c2") == [None] and later.executions("c3") == []


def test_a_sub_agent_s_charge_is_an_effect_of_spawn_agent_not_a_compared_step() -> None:
    spawn = (ev.ToolCallRequested, {"call_id": "c1", "tool": "spawn_agent", "arguments": {}})
    charged = (
        ev.SubAgentCharged,
        {"spawn_id": "s", "child_agent_id": "a.sub-1", "tokens": 7, "cost_usd": 0.0},
    )
    answered = (ev.ToolCallSucceeded, {"call_id": "c1", "tool": "spawn_agent", "result": {}})
    recorded = stream(START, VISIBLE, calls("spawn_agent"), spawn, charged, answered, ANSWER, DONE)
    replayed = stream(START, VISIBLE, calls("spawn_agent"), spawn, answered, ANSWER, DONE)
    assert compare(recorded, replayed) == []


def test_a_built_in_added_since_the_recording_is_no_difference_but_a_lost_tool_is() -> None:
    recorded = stream(START, (ev.VisibleToolsResolved, {"tools": ["quote", "recall"]}))
    newer = stream(START, (ev.VisibleToolsResolved, {"tools": ["quote", "recall", "update_plan"]}))
    assert compare(recorded, newer) == []
    hidden = (ev.VisibleToolsResolved, {"tools": ["quote"], "filtered": {"update_plan": "deny"}})
    assert compare(stream(START, VISIBLE), stream(START, hidden)) == []
    [lost] = compare(recorded, stream(START, VISIBLE))
    assert lost.step == 2 and lost.recorded is not None and "recall" in lost.recorded.text


def test_a_run_recorded_call_by_call_matches_its_replay_as_one_batch() -> None:
    """Before parallel calls each request was followed by its outcome; a replay records the
    response's requests together and then the outcomes, the same steps in another order."""

    def requested(call_id: str) -> tuple[type[ev.LedgerEvent], dict[str, Any]]:
        return (ev.ToolCallRequested, {"call_id": call_id, "tool": "quote", "arguments": {}})

    def succeeded(call_id: str, result: int = 1) -> tuple[type[ev.LedgerEvent], dict[str, Any]]:
        return (ev.ToolCallSucceeded, {"call_id": call_id, "tool": "quote", "result": result})

    one_by_one = [requested("c1"), succeeded("c1"), requested("c2"), succeeded("c2")]
    batched = [requested("c1"), requested("c2"), succeeded("c1"), succeeded("c2")]
    finished_late = [requested("c1"), requested("c2"), succeeded("c2"), succeeded("c1")]
    head = (START, VISIBLE, calls("quote", "quote"))
    recorded = stream(*head, *one_by_one, ANSWER, DONE)
    assert compare(recorded, stream(*head, *batched, ANSWER, DONE)) == []
    assert compare(recorded, stream(*head, *finished_late, ANSWER, DONE)) == []

    other = [requested("c1"), requested("c2"), succeeded("c1"), succeeded("c2", result=2)]
    [difference] = compare(recorded, stream(*head, *other, ANSWER, DONE))
    assert difference.step == 7 and difference.replay is not None  # c2's outcome
    assert "2" in difference.replay.text
    # the next response's calls are not the first's: steps do not move across responses
    split = stream(*head, requested("c1"), succeeded("c1"), calls("quote"), requested("c2"))
    assert compare(stream(*head, *batched), split) != []
