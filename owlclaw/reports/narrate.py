"""One line of text per notable step of a run, for ``owlclaw trigger`` and the demo."""

from __future__ import annotations

import json
from typing import Any

from events import catalog as ev

WIDTH = 110


def _short(value: Any, width: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _arguments(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return _short(arguments)
    return ", ".join(f"{k}={_short(v, 50)}" for k, v in arguments.items())


def step_text(e: ev.LedgerEvent) -> str | None:  # noqa: PLR0911, PLR0912 - one case per event type
    """What the step was, or None for bookkeeping events."""
    match e:
        case ev.RunStarted(run_no=n, trigger=trigger, focus=focus):
            return f"run {n} started by {trigger}" + (f": {focus!r}" if focus else "")
        case ev.ToolCallRequested(tool=tool, arguments=arguments):
            return f"→ {tool}({_arguments(arguments)})"[:WIDTH]
        case ev.ToolCallSucceeded(tool="recall", result={"memories": [*memories]}):
            found = "; ".join(
                f"{_short(m.get('content'), 60)!r} (relevance {m.get('relevance', 0):.2f})"
                for m in memories
                if isinstance(m, dict)
            )
            return f"  ← recall: {len(memories)} memories" + (f": {found}" if found else "")
        case ev.ToolCallSucceeded(tool=tool, result=result):
            return f"  ← {tool}: {_short(result)}"[:WIDTH]
        case ev.ToolCallFailed(tool=tool, error_code=code, error=error):
            return f"  ✗ {tool}: {code} {_short(error)}"[:WIDTH]
        case ev.ToolCallRejected(tool=tool, error=error):
            return f"  ✗ {tool} rejected: {_short(error)}"[:WIDTH]
        case ev.ToolCallDenied(tool=tool, reason=reason):
            return f"  ✗ {tool} denied: {reason}"[:WIDTH]
        case ev.RunParked(spawn_id=spawn_id) if spawn_id:
            return "  ⏸ parked: waiting for a sub-agent's run"
        case ev.RunParked(message_id=message_id) if message_id:
            return "  ⏸ parked: waiting for another agent's reply"
        case ev.RunParked(approval_id=approval_id):
            return f"  ⏸ parked: waiting for a person (approval or question {approval_id})"
        case ev.RunResumed():
            return "  ▶ resumed from its recorded steps"
        case ev.RunCompleted(answer=answer):
            return f"completed: {_short(answer, 90)}"
        case ev.RunSkipped(reason=reason):
            return f"skipped: {reason}"
        case ev.RunFailed(error=error) | ev.RunTerminated(reason=error):
            return f"ended early: {_short(error, 90)}"
        case ev.RunTimedOut():
            return "timed out"
    return None
