"""A run's events as timeline steps: what the run page shows of each, as plain text that the
templates escape (payloads, arguments and results are attacker-controlled)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from events import catalog as ev
from events.catalog import event_fields
from projections.outbox import Outcome
from projections.tool_calls import ApprovalAnswer

RESULT_CHARS = 2000
"""A tool result longer than this is cut in the timeline (the ledger page has it whole)."""


@dataclass(frozen=True)
class Step:
    version: int
    at: datetime
    kind: str
    """What sort of step (llm, tool, decision, inputs, end, failed, note): its CSS class."""
    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    blocks: list[tuple[str, str]] = field(default_factory=list)
    """Labelled preformatted text: messages, arguments, results."""
    delivery: Delivery | None = None
    """A sent message's delivery (updated in place on the page once the outbox settles it)."""


@dataclass(frozen=True)
class Delivery:
    message_id: str
    status: str
    """``pending`` (the outbox has not recorded it yet), ``delivered``, ``failed`` or
    ``not_sent``: the outbox's row."""
    detail: str


def delivery_of(message_id: str, outcome: Outcome | None) -> Delivery:
    """What the outbox recorded of a message (None: nothing yet), as the timeline says it."""
    if outcome is None:
        return Delivery(message_id, "pending", "not sent yet")
    tries = f"{outcome.attempts} attempt{'' if outcome.attempts == 1 else 's'}"
    if outcome.status == "delivered":
        return Delivery(message_id, "delivered", f"HTTP {outcome.http_status} after {tries}")
    why = outcome.error or outcome.status
    retry = "owlclaw projections retry outbox sends it again"
    return Delivery(message_id, outcome.status, f"after {tries}: {why}; {retry}")


def sent(e: ev.MessageSent, delivery: Delivery) -> Step:
    """A message the run sent, with how the outbox delivered it."""
    facts = [
        ("message", e.message_id),
        ("channel", f"{e.channel} ({e.kind}) {e.url}"),
        ("attempts", f"at most {e.attempts}"),
    ]
    title = f"Message sent via {e.channel}"
    return Step(
        e.originator_version, e.timestamp, "message", title, facts, [("text", e.text)], delivery
    )


def resumed(e: ev.RunResumed, approval_id: str, answer: ApprovalAnswer | None) -> Step:
    """The run went on after the approval it waited for was answered: by whom, how, and why."""
    version, at = e.originator_version, e.timestamp
    facts = [("approval", approval_id)]
    if answer is None or answer.status == "pending":
        facts.append(("answer", "not in the audit view yet (reload to see it)"))
        return Step(version, at, "answer", "Resumed", facts)
    by = f" by {answer.by}" if answer.by else ""
    if answer.answered_at is not None:
        facts.append(("answered", answer.answered_at.strftime("%Y-%m-%d %H:%M:%S UTC")))
    blocks = [("note", answer.note)] if answer.note else []
    return Step(version, at, "answer", f"Resumed: approval {answer.status}{by}", facts, blocks)


def text(value: Any, limit: int | None = None) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    if limit is not None and len(shown) > limit:
        return f"{shown[:limit]}… ({len(shown) - limit} more characters)"
    return shown


def _inputs(inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """The recorded inputs of a decision: identity hashes, memories with scores, skills, the
    system prompt's tokens and what its budget trimmed."""
    shown = []
    for key in ("soul_sha256", "identity_sha256"):
        if key in inputs:
            shown.append((key.removesuffix("_sha256") + " sha256", str(inputs[key])))
    memories = inputs.get("memories") or {}
    if memories:
        shown.append(
            ("recalled memories", "\n".join(f"{m}  score {s:.3f}" for m, s in memories.items()))
        )
    for key, label in (
        ("skills", "skills"),
        ("skill_index", "skill index"),
        ("schedules", "schedules shown"),
        ("inbound", "inbound events"),
        ("model_path", "model path"),
        ("prompt_tokens", "system prompt tokens"),
    ):
        if inputs.get(key):
            shown.append((label, text(inputs[key])))
    if trimmed := inputs.get("trimmed"):
        shown.append(
            (
                "trimmed from the prompt",
                "\n".join(f"{p}: {', '.join(map(str, left))}" for p, left in trimmed.items()),
            )
        )
    return shown


def _llm(e: ev.LLMResponded) -> Step:
    usage = e.usage
    facts = [
        ("model", e.model),
        (
            "tokens",
            f"{usage.get('total_tokens', 0)} ({usage.get('prompt_tokens', 0)} in,"
            f" {usage.get('completion_tokens', 0)} out)",
        ),
        ("cost", f"${e.cost_usd:.6f}"),
        ("latency", f"{e.latency_ms:.0f} ms"),
    ]
    if e.fallback_hops:
        facts.append(("fallbacks", ", ".join(e.fallback_hops)))
    blocks = []
    if content := e.message.get("content"):
        blocks.append(("response", text(content)))
    for call in e.message.get("tool_calls") or []:
        function = call.get("function", {})
        blocks.append((f"calls {function.get('name')}", text(function.get("arguments"))))
    return Step(e.originator_version, e.timestamp, "llm", "LLM response", facts, blocks)


def step_of(e: ev.LedgerEvent) -> Step:  # noqa: PLR0911, PLR0912 - one case per event type
    """How the timeline shows ``e``."""
    version, at = e.originator_version, e.timestamp
    match e:
        case ev.RunStarted():
            facts = [("run", str(e.run_no)), ("trigger", e.trigger), ("focus", e.focus or "-")]
            blocks = [("payload", text(e.payload))] if e.payload else []
            return Step(version, at, "run", "Run started", facts, blocks)
        case ev.VisibleToolsResolved():
            facts = [("visible tools", ", ".join(e.tools) or "none")]
            hidden = "\n".join(f"{name}: {why}" for name, why in sorted(e.filtered.items()))
            return Step(
                version, at, "inputs", "Tools", facts, [("hidden", hidden)] if hidden else []
            )
        case ev.LLMResponded():
            step = _llm(e)
            if e.inputs:
                step.blocks.extend(_inputs(e.inputs))
            return step
        case ev.ToolCallRequested():
            return Step(
                version,
                at,
                "tool",
                f"Tool call {e.tool}",
                [("call", e.call_id)],
                [("arguments", text(e.arguments))],
            )
        case ev.ToolCallSucceeded():
            facts = [("call", e.call_id), ("duration", f"{e.duration_ms:.0f} ms")]
            return Step(
                version,
                at,
                "tool",
                f"Tool result {e.tool}",
                facts,
                [("result", text(e.result, RESULT_CHARS))],
            )
        case ev.ToolCallFailed():
            facts = [
                ("call", e.call_id),
                ("code", e.error_code),
                ("duration", f"{e.duration_ms:.0f} ms"),
            ]
            return Step(version, at, "failed", f"Tool error {e.tool}", facts, [("error", e.error)])
        case ev.ToolCallDenied() | ev.ToolOutcomeUnknown():
            return Step(
                version,
                at,
                "failed",
                f"Tool call {e.tool} {_verb(e)}",
                [("call", e.call_id)],
                [("reason", e.reason)],
            )
        case ev.ToolCallRejected():
            return Step(
                version,
                at,
                "failed",
                f"Tool call {e.tool} rejected",
                [("call", e.call_id)],
                [("error", e.error)],
            )
        case ev.ToolCallTimedOut():
            return Step(
                version,
                at,
                "failed",
                f"Tool call {e.tool} timed out",
                [("call", e.call_id), ("timeout", f"{e.timeout_s:g} s")],
            )
        case ev.DecisionLogged():
            return Step(
                version,
                at,
                "decision",
                f"Decision: {e.decision_type}",
                [],
                [("reasoning", e.reasoning)],
            )
        case ev.PlanUpdated():
            return plan_step(version, at, e.items)
        case ev.RunParked():
            waits = (
                f"sub-agent spawn {e.spawn_id}"
                if e.spawn_id
                else f"the reply to message {e.message_id}"
                if e.message_id
                else f"approval {e.approval_id}"
            )
            return Step(
                version, at, "parked", f"Parked: waiting for {waits}", [("call", e.call_id)]
            )
        case ev.RunResumed():
            return Step(version, at, "note", "Resumed", [("from version", str(e.from_version))])
        case ev.RunCompleted():
            return Step(version, at, "end", "Run completed", _totals(e), [("answer", e.answer)])
        case ev.RunFailed() | ev.RunTerminated() | ev.RunSkipped() | ev.RunTimedOut():
            return Step(
                version,
                at,
                "failed",
                type(e).__name__,
                _totals(e),
                [
                    (
                        "why",
                        text(
                            getattr(e, "error", None)
                            or getattr(e, "reason", "")
                            or f"after {getattr(e, 'timeout_s', 0):g} s"
                        ),
                    )
                ],
            )
    fields = event_fields(e)
    return Step(
        version, at, "note", type(e).__name__, [], [("data", text(fields))] if fields else []
    )


def plan_step(version: int, at: datetime, items: Any) -> Step:
    """A plan update: how far it is, and each item with its status (an erased plan as such)."""
    if not isinstance(items, list):
        return Step(version, at, "decision", "Plan updated", [("plan", "erased")])
    done = sum(item.get("status") == "done" for item in items)
    lines = "\n".join(f"{item.get('status', ''):<11} {item.get('text', '')}" for item in items)
    return Step(
        version,
        at,
        "decision",
        "Plan updated",
        [("done", f"{done} of {len(items)}")],
        [("plan", lines)],
    )


def _verb(e: ev.ToolCallDenied | ev.ToolOutcomeUnknown) -> str:
    return "denied" if isinstance(e, ev.ToolCallDenied) else "outcome unknown"


def _totals(e: ev.LedgerEvent) -> list[tuple[str, str]]:
    assert isinstance(
        e, ev.RunCompleted | ev.RunFailed | ev.RunTerminated | ev.RunSkipped | ev.RunTimedOut
    )
    return [
        ("iterations", str(e.iterations)),
        ("tool calls", str(e.tool_calls)),
        ("tokens", str(e.tokens)),
        ("cost", f"${e.cost_usd:.6f}"),
        ("duration", f"{e.duration_ms:.0f} ms"),
    ]
