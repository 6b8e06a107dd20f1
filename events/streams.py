"""Stream ids and the ledger clock, shared by both aggregates and everything that finds a stream.

Their own module because readers (views, audit, the CLI) need a stream's id without the
aggregates that write it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from uuid import NAMESPACE_URL, UUID, uuid5

AGENT_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/agent")
MESSAGE_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/message")
EVAL_NAMESPACE = uuid5(NAMESPACE_URL, "https://owlclaw.dev/eval")
PRINCIPALS_STREAM_ID = uuid5(NAMESPACE_URL, "https://owlclaw.dev/principals")
"""The one stream of principal changes (added, token rotated, revoked)."""


@lru_cache(maxsize=4096)
def agent_stream_id(agent_id: str) -> UUID:
    """The Agent stream of ``agent_id`` (deterministic, so any process can find it). Cached:
    a host looks its agents' streams up several times a run (uuid5: ~4 µs)."""
    return uuid5(AGENT_NAMESPACE, agent_id)


def run_stream_id(agent_id: str, run_no: int) -> UUID:
    """The Run stream of an agent's ``run_no``-th run, so runs are listed without an index."""
    return uuid5(agent_stream_id(agent_id), f"run/{run_no}")


def message_stream_id(message_id: str) -> UUID:
    """The stream of what became of one outbound message (its delivery failures)."""
    return uuid5(MESSAGE_NAMESPACE, message_id)


def eval_stream_id(eval_id: str) -> UUID:
    """The stream of one ``owlclaw eval`` (its start, each run compared, its summary)."""
    return uuid5(EVAL_NAMESPACE, eval_id)


def approval_id_for(run_id: UUID, call_id: str) -> str:
    """One approval per call: a resumed run finds the answer to the call it parked at."""
    return str(uuid5(run_id, f"approval/{call_id}"))


def now() -> datetime:
    return datetime.now(UTC)
