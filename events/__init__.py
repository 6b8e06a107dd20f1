"""The event ledger: domain events, aggregates, the OwlClaw recorder (PostgreSQL or
in memory), hash chain, ledger API.

Every name is imported when first named: ``Ledger`` brings psycopg and the recorder, the
aggregates bring eventsourcing, which a command that only asks the server, or a message type
(``events.catalog``, ``events.agent_state``), does not need.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from events.agent import Agent
    from events.errors import (
        BlobCorrupted,
        LedgerError,
        LedgerReadError,
        LedgerUnavailable,
        NoDatabase,
        StreamConflict,
        UnknownAgent,
        UnknownBlob,
        UnknownRun,
    )
    from events.ledger import Ledger
    from events.ledger_log import LoggedEvent
    from events.run import Run
    from events.streams import agent_stream_id, run_stream_id

_LAZY = {
    "Agent": "events.agent",
    "Run": "events.run",
    "Ledger": "events.ledger",
    "LoggedEvent": "events.ledger_log",
    "agent_stream_id": "events.streams",
    "run_stream_id": "events.streams",
    **dict.fromkeys(
        (
            "BlobCorrupted",
            "LedgerError",
            "LedgerReadError",
            "LedgerUnavailable",
            "NoDatabase",
            "StreamConflict",
            "UnknownAgent",
            "UnknownBlob",
            "UnknownRun",
        ),
        "events.errors",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'events' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "BlobCorrupted",
    "Ledger",
    "LedgerError",
    "LedgerReadError",
    "LedgerUnavailable",
    "LoggedEvent",
    "NoDatabase",
    "Run",
    "StreamConflict",
    "UnknownAgent",
    "UnknownBlob",
    "UnknownRun",
    "agent_stream_id",
    "run_stream_id",
]
