"""Per-tool usage of one agent, from the audit view (``owlclaw tools AGENT``): calls, errors by
code, timeouts, p50/p95 duration of the calls that ran and how often the model saw a truncated
result (``AuditView.tool_stats``), with rate-limited denials told apart as the runtime words
them."""

from __future__ import annotations

from owlclaw.tools.rate_limits import RATE_LIMITED
from projections.tool_calls import AuditView, ToolStats


def tool_stats(view: AuditView, agent_id: str) -> list[ToolStats]:
    """Per tool the agent called, in name order."""
    return view.tool_stats(agent_id, rate_limited=RATE_LIMITED)
