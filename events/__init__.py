"""The event ledger: domain events, aggregates, the OwlClaw recorder (PostgreSQL or
in memory), hash chain, ledger API."""

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
