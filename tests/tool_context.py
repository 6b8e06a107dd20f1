"""A ToolContext over real Agent and Run aggregates, for calling a tool's ``execute`` directly:
what it records stays pending on the aggregates until the test commits them."""

from __future__ import annotations

import logging

from events.agent import Agent
from events.run import Run
from owlclaw.config import RuntimeConfig
from owlclaw.tools.states import States
from owlclaw.tools.threads import HandlerThreads
from owlclaw.tools.tool import RunScope, ToolContext, idempotency_key


async def _nothing_committed() -> int:
    return 0


def tool_context(agent: Agent, run: Run, call_id: str) -> ToolContext:
    scope = RunScope(
        agent, run, States(), None, _nothing_committed, HandlerThreads(), RuntimeConfig(), {}
    )
    return ToolContext(
        agent_id=agent.agent_id,
        run_id=run.id,
        call_id=call_id,
        idempotency_key=idempotency_key(run.id, call_id),
        logger=logging.getLogger("tests.tool"),
        scope=scope,
    )
