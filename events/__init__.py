"""The event ledger: domain events, aggregates, the OwlClaw recorder (PostgreSQL or
in memory), hash chain, ledger API.

``Ledger`` and ``LoggedEvent`` are imported when first named: they bring psycopg and the
recorder, which a command that only asks the server, or a message type, does not need.
"""

from typing import TYPE_CHECKING, Any

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
from events.run import Run
from events.streams import agent_stream_id, run_stream_id

if TYPE_CHECKING:
    from events.ledger import Ledger
    from events.ledger_log import LoggedEvent

_LAZY = {"Ledger": "events.ledger", "LoggedEvent": "events.ledger_log"}


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
