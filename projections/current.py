"""Read-your-writes for one-off readers (the CLI): a view brought up to every event committed
before the reader asked.

``Ledger.log.head`` is the last position readers can see; while an older transaction is still open
(another process's projection batch, a writer mid-commit), events committed after it stay below
that watermark. A reader that stopped at ``head`` could therefore answer without an event whose
commit it already saw, e.g. the memory of a run whose end ``owlclaw trigger`` just printed. So the
target is ``Ledger.log.last_committed`` and the reader waits, bounded, for the watermark to pass it.
"""

from __future__ import annotations

import time

from events.ledger import Ledger
from projections.runner import ProjectionRunner
from projections.view import View

STALL_TIMEOUT_S = 10.0
"""How long the view may make no progress towards the target before the reader gives up."""


class ViewBehind(RuntimeError):
    """The view could not reach the committed position: an answer from it may be incomplete."""

    def __init__(self, name: str, position: int, committed: int, stalled_s: float):
        super().__init__(
            f"the {name} view is at log position {position}, short of {committed} committed"
            f" before this command; an open transaction held the log back for {stalled_s:g} s,"
            " so this answer may be incomplete"
        )
        self.position = position
        self.committed = committed


def catch_up_to_committed(
    ledger: Ledger, view: View, stall_timeout_s: float = STALL_TIMEOUT_S
) -> int:
    """Apply to ``view`` every event committed before this call; returns that log position.

    A served runner of the same view may apply some of them meanwhile: each step re-reads the
    tracked position under the projection's lock and resumes from it, so nothing is applied
    twice. Raises ``ViewBehind`` after ``stall_timeout_s`` without progress.
    """
    committed = ledger.log.last_committed()
    runner = ProjectionRunner(ledger, view)
    deadline = time.monotonic() + stall_timeout_s
    while runner.position < committed:
        before = runner.position
        runner.step()
        if runner.position > before:
            deadline = time.monotonic() + stall_timeout_s
        elif time.monotonic() >= deadline:
            raise ViewBehind(view.name, runner.position, committed, stall_timeout_s)
        else:
            time.sleep(runner.HELD_BACK_POLL_SECONDS)
    return committed
