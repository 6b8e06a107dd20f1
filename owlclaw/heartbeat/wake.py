"""What one beat found, and the payload of the heartbeat run it queues: the sources that woke
the agent (with their counts and notifications, bounded) and those that failed, so the model
and an auditor read why the run woke, or why a source could not say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from events.agent_state import WOKEN_BY

FAILED = "failed_sources"
"""The payload key listing the sources that failed or timed out (they woke nothing)."""
PAYLOADS_KEPT = 20
"""Notification payloads a LISTEN source shows per beat (the newest)."""
PAYLOAD_CHARS = 1_000
"""Each notification payload is cut to this many characters."""
ERROR_CHARS = 300


class SourceResult(msgspec.Struct, frozen=True, kw_only=True):
    """One source's answer at one beat: a count (rows, or notifications since the last beat)
    or the error that kept it from answering."""

    source: str
    kind: Literal["sql", "listen"]
    count: int = 0
    payloads: list[str] = []
    """A LISTEN source's notification payloads, the newest ``PAYLOADS_KEPT``, each cut."""
    error: str | None = None

    @property
    def woke(self) -> bool:
        return self.error is None and self.count > 0

    @classmethod
    def failed(cls, source: str, kind: Literal["sql", "listen"], error: str) -> SourceResult:
        return cls(source=source, kind=kind, error=error[:ERROR_CHARS])


def wake_payload(results: Sequence[SourceResult]) -> dict[str, Any]:
    """The heartbeat run's payload: ``woken_by`` (the sources that found something) and
    ``failed_sources``, each present only when not empty; empty when nothing woke or failed."""
    payload: dict[str, Any] = {}
    woke = [_woken(r) for r in results if r.woke]
    failed = [{"source": r.source, "kind": r.kind, "error": r.error} for r in results if r.error]
    if woke:
        payload[WOKEN_BY] = woke
    if failed:
        payload[FAILED] = failed
    return payload


def _woken(result: SourceResult) -> dict[str, Any]:
    shown: dict[str, Any] = {"source": result.source, "kind": result.kind, "count": result.count}
    if result.kind == "listen":
        shown["payloads"] = [p[:PAYLOAD_CHARS] for p in result.payloads[-PAYLOADS_KEPT:]]
    return shown


def failures(payload: dict[str, Any]) -> str:
    """ "source 'x' failed: <error>; ..." for the failed sources of a heartbeat's payload."""
    return "; ".join(
        f"source {f.get('source')!r} failed: {f.get('error')}" for f in payload.get(FAILED, [])
    )
