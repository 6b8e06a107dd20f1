"""Counterfactual re-decision: would another model have decided the same at each recorded step?

At each decision point of a recorded run the candidate model is asked with the context the
agent had then (``decision_points``); no tool ever executes. Decisions compare by the tools
called with their canonical arguments (in order), or by the final answer's text. Following the
candidate's own branch after it diverges goes on only while every call it makes was recorded
with the same canonical arguments, whose recorded outcome it is then told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from owlclaw.audit.decision_points import (
    RunContext,
    call_arguments,
    call_name,
    tool_message,
)
from owlclaw.runtime.models import complete
from owlclaw.tools.encoding import canonical_arguments
from owlclaw.tools.live import reraise_cancellation

Outcome = Literal["identical", "different", "new_tool", "refused"]


@dataclass(frozen=True)
class StepDecision:
    """What a model decided at one step: the tools it calls, or its final answer."""

    calls: tuple[tuple[str, str], ...] = ()
    """(tool, canonical arguments) of each call, in order."""
    answer: str | None = None

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> StepDecision:
        calls = message.get("tool_calls") or []
        if calls:
            return cls(tuple((call_name(c), canonical_arguments(call_arguments(c))) for c in calls))
        return cls(answer=str(message.get("content") or "").strip())

    @property
    def tools(self) -> set[str]:
        return {name for name, _ in self.calls}

    def __str__(self) -> str:
        if self.answer is not None:
            return f"answer: {self.answer!r}"
        return "; ".join(f"{name} {arguments}" for name, arguments in self.calls)


@dataclass
class Step:
    """One decision point: the recorded decision and the candidate's."""

    step: int
    recorded: StepDecision | None
    """None past the end of the recording (on a followed branch)."""
    candidate: StepDecision | None
    """None when the candidate failed or refused (``error`` says how)."""
    error: str | None = None
    branch: bool = False
    """Asked on the candidate's own branch (``follow``), not the recorded conversation."""
    recorded_tokens: int = 0
    candidate_tokens: int = 0
    recorded_cost_usd: float = 0.0
    candidate_cost_usd: float = 0.0

    @property
    def same(self) -> bool:
        return self.candidate is not None and self.candidate == self.recorded

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "recorded": None if self.recorded is None else str(self.recorded),
            "candidate": None if self.candidate is None else str(self.candidate),
            "same": self.same,
            "error": self.error,
            "branch": self.branch,
            "recorded_tokens": self.recorded_tokens,
            "candidate_tokens": self.candidate_tokens,
            "recorded_cost_usd": self.recorded_cost_usd,
            "candidate_cost_usd": self.candidate_cost_usd,
        }


@dataclass
class ReDecision:
    """A recorded run re-decided by ``model``."""

    agent_id: str
    run_no: int
    run_id: str
    model: str
    steps: list[Step] = field(default_factory=list)
    stopped: str | None = None
    """Why following the candidate's branch stopped."""
    drift: list[str] = field(default_factory=list)

    @property
    def first_divergence(self) -> Step | None:
        return next((s for s in self.steps if not s.same), None)

    @property
    def outcome(self) -> Outcome:
        """identical; refused (the model failed or refused first); new_tool (it calls a tool
        the recorded decision did not); different (other arguments or answer)."""
        first = self.first_divergence
        if first is None:
            return "identical"
        if first.candidate is None:
            return "refused"
        recorded_tools = first.recorded.tools if first.recorded is not None else set()
        return "new_tool" if first.candidate.tools - recorded_tools else "different"

    def as_dict(self) -> dict[str, Any]:
        first = self.first_divergence
        return {
            "agent_id": self.agent_id,
            "run_no": self.run_no,
            "run_id": self.run_id,
            "model": self.model,
            "outcome": self.outcome,
            "first_divergence": None if first is None else first.as_dict(),
            "stopped": self.stopped,
            "drift": self.drift,
            "steps": [s.as_dict() for s in self.steps],
        }


async def redecide(
    litellm: Any,
    context: RunContext,
    model: str,
    *,
    timeout_s: float,
    follow: bool = False,
    max_branch_steps: int = 50,
) -> ReDecision:
    """Ask ``model`` at every decision point of the recorded run; with ``follow``, stop at the
    first divergence and go on down the candidate's branch instead (at most
    ``max_branch_steps`` more steps)."""
    report = ReDecision(
        context.agent_id, context.run_no, str(context.recorded.run_id), model, drift=context.drift
    )
    recorded_steps = context.points()
    for point in recorded_steps:
        step, message = await _ask(litellm, model, point.messages, point.tools, timeout_s)
        step.step = point.step
        step.recorded = StepDecision.of(point.response.message)
        step.recorded_tokens = point.response.usage.get("total_tokens", 0)
        step.recorded_cost_usd = point.response.cost_usd
        report.steps.append(step)
        if follow and not step.same:
            report.stopped = await _follow(
                litellm,
                context,
                model,
                report,
                (point.messages, message),
                timeout_s,
                max_branch_steps,
            )
            break
    return report


async def _follow(
    litellm: Any,
    context: RunContext,
    model: str,
    report: ReDecision,
    branch: tuple[list[dict[str, Any]], dict[str, Any] | None],
    timeout_s: float,
    max_steps: int,
) -> str:
    """Go on down the candidate's branch (the conversation it diverged in, and its message
    there); why it stopped."""
    messages, message = branch
    recorded = context.responses
    known = context.recorded_calls()
    for _ in range(max_steps):
        if message is None:
            return "the candidate failed or refused"
        calls = message.get("tool_calls") or []
        if not calls:
            return "the candidate answered"
        told = []
        for call in calls:
            key = (call_name(call), canonical_arguments(call_arguments(call)))
            if key not in known:
                return f"no recorded outcome of {key[0]} {key[1]}"
            told.append(tool_message(call, context.told(known[key], key[0])))
        messages = [*messages, message, *told]
        step, message = await _ask(litellm, model, messages, context.tools, timeout_s)
        step.step, step.branch = len(report.steps) + 1, True
        if step.step <= len(recorded):
            response = recorded[step.step - 1]
            step.recorded = StepDecision.of(response.message)
            step.recorded_tokens = response.usage.get("total_tokens", 0)
            step.recorded_cost_usd = response.cost_usd
        report.steps.append(step)
    return f"followed {max_steps} steps"


async def _ask(
    litellm: Any,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    timeout_s: float,
) -> tuple[Step, dict[str, Any] | None]:
    """The candidate's step (its decision, or why there is none) and its message."""
    try:
        answer = await complete(litellm, model, messages, tools, timeout_s)
    except Exception as e:
        reraise_cancellation(e)
        return Step(0, None, None, error=f"{type(e).__name__}: {e}"[:500]), None
    tokens = answer.usage.get("total_tokens", 0)
    refusal = answer.message.get("refusal")
    if refusal or answer.finish_reason == "content_filter":
        error = f"refused: {refusal or answer.finish_reason}"
        return Step(0, None, None, error, candidate_tokens=tokens), None
    step = Step(
        0,
        None,
        StepDecision.of(answer.message),
        candidate_tokens=tokens,
        candidate_cost_usd=answer.cost_usd,
    )
    return step, answer.message
