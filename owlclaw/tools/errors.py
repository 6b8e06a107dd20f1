"""Structured tool errors: what goes back to the LLM instead of an exception."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

ErrorKind = Literal["user", "system", "timeout"]


class ToolError(msgspec.Struct, frozen=True):
    """``user`` errors are the model's to fix (bad arguments); ``system`` errors are ours
    (a provider failed, the database went away) and may be worth retrying; ``timeout``: the
    tool did not finish within its time limit."""

    error: str
    error_code: str
    retryable: bool = False
    kind: ErrorKind = "user"


class Parked(Exception):
    """The run waits — for a person's answer to an approval, or for a sub-agent's run — and
    stops here, committed, not ended; what it waits for is recorded (RunParked). The other calls
    of the same model response still run first."""

    def __init__(self, waits_for: str):
        super().__init__(waits_for)
        self.waits_for = waits_for


class Stopped(Exception):
    """Replay only: the recorded run's process stopped while this call ran (the record has
    RunInterrupted before its outcome). The replay goes on as the resumed run did."""

    def __init__(self, arguments: dict[str, Any]):
        super().__init__("the recorded run stopped while the call ran")
        self.arguments = arguments


def invalid_arguments(message: str) -> ToolError:
    return ToolError(error=message, error_code="INVALID_ARGUMENTS")


UNKNOWN_TOOL = "unknown tool"
"""How the error of a call to a tool the run does not have begins (its name is the model's)."""


def unknown_tool(name: str, available: list[str]) -> ToolError:
    return ToolError(
        error=f"{UNKNOWN_TOOL} {name!r}; available tools: {', '.join(sorted(available))}",
        error_code="UNKNOWN_TOOL",
    )
