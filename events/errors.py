"""The errors the ledger raises, in a module of their own: every part of the ledger (its log, its
chains, its database side) raises them, and callers catch them without importing the ledger."""

from __future__ import annotations

from events.codec import LedgerDecodeError


class LedgerError(RuntimeError):
    """Base class of the errors the ledger raises."""


class StreamConflict(LedgerError):
    """Another writer appended to the stream first; this writer's view of it is stale."""


class UnknownAgent(LedgerError, KeyError):
    def __init__(self, agent_id: str):
        super().__init__(f"unknown agent {agent_id!r}")
        self.agent_id = agent_id

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownRun(LedgerError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class LedgerUnavailable(LedgerError):
    """The database could not be reached; ``committed`` says what became of the append."""

    def __init__(self, message: str, committed: bool | None = None):
        super().__init__(message)
        self.committed = committed


class NoDatabase(LedgerError):
    """The in-memory ledger was asked for its PostgreSQL database (which read models need)."""


class UnknownBlob(LedgerError, KeyError):
    """No blob is stored under the sha256 asked for."""

    def __str__(self) -> str:
        return str(self.args[0])


class BlobCorrupted(LedgerError):
    """A stored blob's bytes no longer hash to the sha256 it is stored under."""


class LedgerReadError(LedgerError):
    """A stored event could not be read; names its stream, version and log position."""

    def __init__(self, cause: LedgerDecodeError, position: int | None):
        where = f" at log position {position}" if position is not None else ""
        super().__init__(f"{cause}{where}")
        self.cause = cause
        self.position = position
