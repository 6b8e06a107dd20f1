"""Short-term context: what the agent did in its recent runs, within a token budget.

Items come from the ledger (decisions, tool calls and run outcomes of the latest runs). When they
do not fit, compression keeps the most important items first and, among equally important ones,
the most recent; what is kept is shown in time order with a note of how much was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from events import catalog as ev
from owlclaw.llm.tokens import TokenCount

RECENT_RUNS = 5
IMPORTANCE = {"decision": 3, "outcome": 2, "tool": 1}


@dataclass(frozen=True)
class ContextItem:
    text: str
    importance: int
    order: int
    """Position in time (larger is more recent)."""


HEADER = "## Recent activity"


def build_context(items: Sequence[ContextItem], budget_tokens: int, tokens: TokenCount) -> str:
    """The context text, never more than ``budget_tokens`` tokens as ``tokens`` counts them
    (empty if nothing fits)."""
    if not items:
        return ""
    ranked = sorted(items, key=lambda i: (-i.importance, -i.order))
    kept: list[ContextItem] = []
    used = tokens(HEADER) + 1
    omission_reserve = tokens("\n(999999 earlier items omitted)")
    for item in ranked:
        cost = tokens("\n- " + item.text)
        reserve = 0 if len(kept) + 1 == len(items) else omission_reserve
        if used + cost + reserve > budget_tokens:
            break
        kept.append(item)
        used += cost
    if not kept:
        return ""
    lines = [HEADER, *(f"- {i.text}" for i in sorted(kept, key=lambda i: i.order))]
    if omitted := len(items) - len(kept):
        lines.append(f"({omitted} earlier items omitted)")
    return "\n".join(lines)


def describe_run(events: Sequence[ev.LedgerEvent]) -> list[tuple[str, int]]:
    """(text, importance) of the run's notable events, in order."""
    described = (_describe(e) for e in events)
    return [(text[:500], IMPORTANCE[kind]) for text, kind in described if text]


def _describe(e: ev.LedgerEvent) -> tuple[str, str]:  # noqa: PLR0911 - one per event type
    match e:
        case ev.RunStarted(run_no=n, trigger=trigger, focus=focus):
            return f"run {n} ({trigger}){f': {focus}' if focus else ''}", "outcome"
        case ev.DecisionLogged(decision_type=kind, reasoning=reasoning):
            return f"decided ({kind}): {reasoning}", "decision"
        case ev.ToolCallSucceeded(tool=tool) if tool != "log_decision":
            return f"called {tool}", "tool"
        case ev.ToolCallFailed(tool=tool, error_code=code):
            return f"{tool} failed: {code}", "tool"
        case ev.RunCompleted(answer=answer):
            return f"answered: {answer}", "outcome"
        case ev.RunFailed(error=error) | ev.RunTerminated(reason=error):
            return f"run ended early: {error}", "outcome"
    return "", "tool"
