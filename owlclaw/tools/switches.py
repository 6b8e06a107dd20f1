"""The operator's switches: enabling and disabling an agent's tools without editing its app.

``owlclaw tools AGENT --disable NAME`` records a ToolsChanged on the agent's stream; the Agent
aggregate keeps the disabled set and governance hides those tools from the agent's next run on
(and refuses a call to one). Like every other write that reaches an agent, it goes through the
agent's one writer when ``owlclaw run`` serves it (``Inbox.change_tools``, reached with
``POST /agents/{id}/tools``); with no server serving the agent, the CLI writes it directly with
the ledger's optimistic concurrency (``change_tools_directly``): a ToolsChanged commutes with the
agent's other facts, so a conflicting append is re-recorded on top of the stream as it is then.
"""

from __future__ import annotations

from collections.abc import Collection

from events import Ledger
from owlclaw.messages import ToolsChange


def change_tools_directly(
    ledger: Ledger,
    agent_id: str,
    known: Collection[str],
    enable: Collection[str],
    disable: Collection[str],
    by: str,
) -> ToolsChange:
    """Record the change on the agent's stream from outside its writer (no server serves it).

    Raises UnknownAgent, or UnknownTools / ValueError for names it cannot change (nothing is
    recorded then)."""
    agent = ledger.load_agent(agent_id)
    if agent.change_tools(enable, disable, known, by=by) is None:
        return ToolsChange(agent_id, list(agent.state.disabled_tools))
    agent, positions = ledger.append_rebasing(agent)
    return ToolsChange(agent_id, list(agent.state.disabled_tools), positions[-1])
