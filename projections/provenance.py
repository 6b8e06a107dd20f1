"""Where a memory came from: the MemoryRemembered it was projected from and the run step that
recorded it.

Its own module because it is read from the run's stream, apart from the memory view's table
upkeep: the view traces each memory when it projects it, and ``owlclaw why`` walks the same way
back to the model response. Nothing is added to the event: its stream and version name it, the
ledger keeps its hash, and the step follows from the run's other events (the ``remember``
call's result holds the memory id), so a rebuild gives old ledgers' memories provenance too.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def remembered_in(run: Sequence[ev.LedgerEvent], version: int, memory_id: UUID) -> Step:
    """The step of the run (its events in version order) that recorded ``memory_id`` at
    ``version``: the model responses before it, and the ``remember`` call whose result names
    it (recorded after it, in the same commit)."""
    run_no, step, call_id = 0, 0, ""
    for e in run:
        if isinstance(e, ev.RunStarted):
            run_no = e.run_no
        elif e.originator_version < version and isinstance(e, ev.LLMResponded):
            step += 1
        elif (
            e.originator_version > version
            and isinstance(e, ev.ToolCallSucceeded)
            and e.tool == "remember"
            and isinstance(e.result, dict)
            and e.result.get("memory_id") == str(memory_id)
        ):
            call_id = e.call_id
            break
    return Step(run_no, step, call_id)
