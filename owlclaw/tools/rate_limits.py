"""Per-tool rate limits whose windows are what the ledger recorded.

"5 calls per hour" must mean per hour, not per activation: an idle agent is passivated, its
process restarts, its app changes (the limits are rebuilt), and each time a window kept only in
memory would start empty. So a tool's window is loaded from the ledger — the ToolCallRequested
events of the agent's runs, which record every admitted call before it executes (write-ahead) —
when the tool first becomes limited in a runtime: at activation, or when an app change adds or
lengthens its limit. From then on the limiter counts in memory each call it admits, which the
ledger records at the same moment, so memory and ledger agree without reading the ledger per
call (a tool step must stay ~2 ms). Keeping the calls in the Agent aggregate instead would add
an agent-stream event to every limited call.

Loading walks the agent's runs back from the latest (runs of an agent run one at a time, so
the first run that ended before the longest window ends the walk, as does having the last
``calls`` calls of every limited tool): one Run stream read per run inside the window, once per
activation, on the runtime's ledger thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.streams import run_stream_id
from owlclaw.app import RateLimit

RATE_LIMITED = "rate limit:"
"""How the reason of a call refused for its rate limit starts (ToolCallDenied.reason)."""


class RateLimiter:
    """Sliding-window call counts per tool for one agent (the agent's runs are serialized).

    ``now`` is in seconds since the epoch (``time.time()``): the clock of the ledger's
    timestamps, which outlives the process (a monotonic clock does not)."""

    def __init__(self, limits: Mapping[str, RateLimit]):
        self.limits = dict(limits)
        self._calls: dict[str, deque[float]] = {}
        self._loaded: dict[str, float] = {}
        """Tool -> the window (seconds) its calls were loaded from the ledger for."""

    def with_limits(self, limits: Mapping[str, RateLimit]) -> RateLimiter:
        """The same counted calls under new limits: an app change does not reset a window."""
        changed = RateLimiter(limits)
        changed._calls, changed._loaded = self._calls, self._loaded
        return changed

    def load(self, ledger: Ledger, agent: Agent, now: float) -> None:
        """Load from the ledger the window of every limited tool not loaded for its current
        length (nothing to do once loaded: the limiter counts what it admits)."""
        due = {
            tool: limit
            for tool, limit in self.limits.items()
            if self._loaded.get(tool, 0.0) < limit.per_seconds
        }
        if not due:
            return
        for tool, times in recorded_calls(ledger, agent, due, now).items():
            self._calls[tool] = deque(times)
            self._loaded[tool] = due[tool].per_seconds

    def admit(self, tool: str, now: float) -> str | None:
        """Count the call and return None, or the reason it exceeds the tool's limit."""
        limit = self.limits.get(tool)
        if limit is None:
            return None
        calls = self._calls.setdefault(tool, deque())
        while calls and calls[0] <= now - limit.per_seconds:
            calls.popleft()
        if len(calls) >= limit.calls:
            return (
                f"{RATE_LIMITED} {tool} allows {limit.calls} calls per {limit.per_seconds:g} s;"
                f" retry in {calls[0] + limit.per_seconds - now:.1f} s"
            )
        calls.append(now)
        return None


def recorded_calls(
    ledger: Ledger, agent: Agent, limits: Mapping[str, RateLimit], now: float
) -> dict[str, list[float]]:
    """When the agent's recorded calls (ToolCallRequested) of each limited tool happened inside
    its window, oldest first: at most its last ``calls`` (all that a full window needs)."""
    found: dict[str, list[float]] = {tool: [] for tool in limits}
    oldest = now - max(limit.per_seconds for limit in limits.values())
    for run_no in range(agent.state.run_count, 0, -1):
        events = ledger.stream(run_stream_id(agent.agent_id, run_no))
        for e in reversed(events):
            if not isinstance(e, ev.ToolCallRequested) or e.tool not in found:
                continue
            at, limit, times = e.timestamp.timestamp(), limits[e.tool], found[e.tool]
            if at > now - limit.per_seconds and len(times) < limit.calls:
                times.append(at)
        if all(len(found[t]) >= limits[t].calls for t in found):
            break
        if events and events[-1].timestamp.timestamp() <= oldest:
            break  # this run, and every earlier one, ended before the longest window
    return {tool: times[::-1] for tool, times in found.items()}
