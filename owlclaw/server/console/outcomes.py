"""What a run's timeline shows that the run's own stream does not hold: who answered the
approval it waited for (on the agent's stream; read from the audit view) and how each message it
sent was delivered (the outbox view, which delivers after the run has recorded it)."""

from __future__ import annotations

import uuid

from events import catalog as ev
from owlclaw.server.console.steps import Delivery, Step, delivery_of, resumed, sent, step_of
from owlclaw.server.overview import caught_up
from owlclaw.server.service import Service
from projections import AuditView, Outbox
from projections.tool_calls import ApprovalAnswer


class RunOutcomes:
    """One run's page, followed in order: ``track`` and ``shown`` keep what later steps need
    (on the event loop); ``step`` and ``deliveries`` read the views (call them in a thread)."""

    def __init__(self, service: Service, run_id: uuid.UUID):
        self.service = service
        self.run_id = run_id
        self.waiting: str | None = None
        """The approval the run is parked at."""
        self.pending: set[str] = set()
        """The messages the page shows as not delivered yet."""

    def track(self, event: ev.LedgerEvent) -> str | None:
        """Note ``event`` (also one the page already has); for a RunResumed, the approval
        the run had waited for."""
        answered = None
        if isinstance(event, ev.RunParked):
            self.waiting = event.approval_id or None
        elif isinstance(event, ev.RunResumed):
            answered, self.waiting = self.waiting, None
        return answered

    def shown(self, delivery: Delivery) -> None:
        """The page shows ``delivery`` now: a pending one is watched until the outbox settles."""
        if delivery.status == "pending":
            self.pending.add(delivery.message_id)
        else:
            self.pending.discard(delivery.message_id)

    def step(self, event: ev.LedgerEvent, answered: str | None) -> Step:
        if isinstance(event, ev.RunResumed) and answered is not None:
            return resumed(event, answered, self._answers().get(answered))
        if isinstance(event, ev.MessageSent):
            return sent(event, self.deliveries([event.message_id])[0])
        return step_of(event)

    def deliveries(self, message_ids: list[str]) -> list[Delivery]:
        outcomes = self.service.view(Outbox).outcomes(message_ids)
        return [delivery_of(m, outcomes.get(m)) for m in message_ids]

    def _answers(self) -> dict[str, ApprovalAnswer]:
        audit = self.service.view(AuditView)
        caught_up(self.service, audit)  # the answer was recorded just before the run resumed
        return audit.approval_answers(self.run_id)
