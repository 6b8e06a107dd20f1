"""A ToolContext over real Agent and Run aggregates, for calling a tool's ``execute`` directly:
what it records stays pending on the aggregates until the test commits them; the blobs it
stores go to ``blobs`` (a test that gives none stores none)."""

from __future__ import annotations

import logging

from events.agent import Agent
from events.blobs import LedgerBlobs
from events.run import Run
from owlclaw.config import RuntimeConfig
from owlclaw.tools.states import States
from owlclaw.tools.threads import HandlerThreads
from owlclaw.tools.tool import RunScope, ToolContext, idempotency_key


async def _nothing_committed() -> int:
    return 0


def tool_context(
    agent: Agent,
    run: Run,
    call_id: str,
    *,
    blobs: LedgerBlobs | None = None,
    limits: RuntimeConfig | None = None,
) -> ToolContext:
    async def store_blob(data: bytes, media_type: str) -> str:
        if blobs is None:
            raise AssertionError("this test gave the tool no blob store")
        return blobs.put(data, media_type)

    scope = RunScope(
        agent,
        run,
        States(),
        None,
        _nothing_committed,
        HandlerThreads(),
        limits or RuntimeConfig(),
        {},
        store_blob,
    )
    return ToolContext(
        agent_id=agent.agent_id,
        run_id=run.id,
        call_id=call_id,
        idempotency_key=idempotency_key(run.id, call_id),
        logger=logging.getLogger("tests.tool"),
        scope=scope,
    )
