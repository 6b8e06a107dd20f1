"""Re-apply the events a view parked, once their cause is fixed (``owlclaw inspect``).

Its own module because it is repair, run by hand, not part of the runner's loop: it shares
only the lock and the error classification with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from events.ledger import Ledger
from projections import parked as parking
from projections.failures import is_infrastructure
from projections.locks import lock_key
from projections.parked import describe
from projections.view import View


@dataclass(frozen=True)
class RetryOutcome:
    """What re-applying one parked event did: ``error`` is None when it is now in the view."""

    position: int
    topic: str
    error: str | None


def retry_parked(ledger: Ledger, view: View) -> list[RetryOutcome]:
    """Re-apply the events ``view`` parked, in log order, each in its own transaction under
    the projection's lock: one that applies leaves ``projection_errors``, one that fails again
    stays there with its new error, last_seen and attempts.

    A retried event is applied after later events of the log, out of order. That is acceptable
    for these views: each event writes rows keyed by its own ids (a tool call, a run, a memory,
    a schedule) and records its log position, so applying it late gives the same rows whenever
    no later event touched the same entity (a memory, a schedule request, a run's last event).
    Where a later event of the same entity was applied first (a run's end before its parked
    start), the row can differ from log order; ``rebuild`` replays the whole log in order when
    that matters.
    """
    outcomes = []
    lock = lock_key(view)
    with view.transaction() as curs:
        pending = parking.parked(curs, view.tracking_name)
    for entry in pending:
        [logged] = ledger.log.read(after=entry.position - 1, limit=1, up_to=entry.position)
        failure: Exception | None = None
        try:
            view.prepare([logged])
        except Exception as e:
            if is_infrastructure(e):
                raise
            failure = e
        with view.transaction(commit=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock,))
            if failure is None:
                try:
                    with curs.connection.transaction():
                        view.apply(curs, logged)
                except Exception as e:
                    if is_infrastructure(e):
                        raise
                    failure = e
            if failure is None:
                parking.unpark(curs, view.tracking_name, entry.position)
            else:
                parking.park(curs, view.tracking_name, logged, failure, attempts=1)
        if failure is None:
            view.committed([logged])
        outcomes.append(
            RetryOutcome(entry.position, entry.topic, describe(failure) if failure else None)
        )
    return outcomes
