"""Where a memory came from: the MemoryRemembered it was projected from and the run step that
recorded it.

Its own module because it is read from the run's stream, apart from the memory view's table
upkeep: the view traces each memory when it projects it, and ``owlclaw why`` walks the same way
back to the model response. Nothing is added to the event: its stream and version name it, the
ledger keeps its hash, and the step follows from the run's other events (the ``remember``
call's result holds the memory id), so a rebuild gives old ledgers' memories provenance too.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from uuid import UUID

from events import catalog as ev


def reference(run_no: int, step: int) -> str:
    """The short form MEMORY.md and recall show: ``run 12, step 3`` ("" when the run is
    unknown, ``run 12`` when the step is)."""
    if not run_no:
        return ""
    return f"run {run_no}" + (f", step {step}" if step else "")


@dataclass(frozen=True)
class Provenance:
    """The event a memory came from: its run, the step in it and the event's stored hash.

    0 and "" stand for what the run's stream does not say: ``run_no`` without a RunStarted,
    ``step`` without a model response before the memory, ``call_id`` without a ``remember``
    call whose result names the memory (a memory recorded by hand)."""

    run_id: UUID
    run_no: int
    step: int
    """1-based: the step-th model response (LLMResponded) of the run, as ``owlclaw explain``
    numbers steps; the response whose ``remember`` call recorded the memory."""
    call_id: str
    """The ``remember`` tool call that recorded the memory."""
    version: int
    """The MemoryRemembered's version in the run's stream."""
    position: int
    """Its log position."""
    event_hash: str
    """Its hash as the ledger stored it when the view projected it (hex; "" if not found)."""

    def reference(self) -> str:
        return reference(self.run_no, self.step)


@dataclass(frozen=True)
class Step:
    """The step of a run a memory was recorded in (0 and "" when the stream does not say)."""

    run_no: int
    step: int
    call_id: str

    def reference(self) -> str:
        return reference(self.run_no, self.step)


def remembered_steps(
    run: Sequence[ev.LedgerEvent], memories: Iterable[tuple[int, UUID]]
) -> dict[UUID, Step]:
    """The step of the run (its events in version order) that recorded each memory, given as
    (version, memory id): the model responses before it, and the ``remember`` call whose result
    names it (recorded after it, in the same commit). One pass over the run for all of its
    memories: a run that remembered a thousand things is not read a thousand times."""
    run_no = next((e.run_no for e in run if isinstance(e, ev.RunStarted)), 0)
    responses = [e.originator_version for e in run if isinstance(e, ev.LLMResponded)]
    calls: dict[str, list[tuple[int, str]]] = {}
    for e in run:
        if isinstance(e, ev.ToolCallSucceeded) and e.tool == "remember":
            named = e.result.get("memory_id") if isinstance(e.result, dict) else None
            calls.setdefault(str(named), []).append((e.originator_version, e.call_id))
    return {
        memory_id: Step(
            run_no,
            bisect_left(responses, version),
            next((c for v, c in calls.get(str(memory_id), ()) if v > version), ""),
        )
        for version, memory_id in memories
    }
