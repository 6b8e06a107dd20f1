"""Where the webhook serves the A2A agents, without the SDK (seconds to import): the guard and
the webhook route by these before anyone has asked over A2A."""

PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
"""The SDK's ``AGENT_CARD_WELL_KNOWN_PATH`` (a unit test holds them equal)."""


def is_card_path(path: str) -> bool:
    """A card is public (A2A discovery reads it before it has credentials)."""
    return path.startswith(f"{PREFIX}/") and path.endswith(CARD_PATH)
