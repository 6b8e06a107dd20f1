"""__AGENT_ID__'s capabilities and state: plain functions; their type hints are the schema."""

from __future__ import annotations

from typing import Literal

from owlclaw import Registry

registry = Registry()


@registry.state("queue_state", ttl_seconds=5)
def queue_state() -> dict[str, int]:
    """Replace with a call to your ticketing system."""
    return {"open_tickets": 14, "oldest_minutes": 42}


@registry.capability("Send the support team a short message.")
def notify_team(message: str, urgency: Literal["low", "high"] = "low") -> dict[str, object]:
    """Replace with your chat or paging integration."""
    return {"sent": True, "urgency": urgency, "characters": len(message)}
