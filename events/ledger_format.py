"""The ledger's format, recorded in its database: an older OwlClaw refuses a ledger that a newer
one wrote instead of misreading it.

A format is two things: ``LEDGER_FORMAT``, the layout of the ledger's table and append functions
(``events.recorder``, ``events.append_sql``), bumped by hand when they change; and the event
catalog, each event type's class version (``events.catalog``), read off the classes, so a new
event type or a ``class_version`` bump needs no second step. A process opening the ledger
compares both with what the ledger records before it creates or replaces anything there
(``events.recorder``), and records its own when it is the newer.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import msgspec

from events.catalog import EVENT_TYPES
from events.errors import LedgerError

LEDGER_FORMAT = 1
"""The layout of the ledger's table and append functions this code writes and reads."""


class LedgerFormat(msgspec.Struct, frozen=True, kw_only=True):
    """What a ledger's writers wrote it with: as recorded, or as this process would."""

    format: int
    events: dict[str, int]
    """Event type -> class version (the ``@N`` of its stored topic)."""
    owlclaw: str = "unknown"
    """The OwlClaw release that recorded it."""


def running_format() -> LedgerFormat:
    """The format this OwlClaw writes: of its own event classes (a test's samples are not)."""
    try:
        release = version("owlclaw")
    except PackageNotFoundError:  # run from a source tree that was never installed
        release = "unknown"
    return LedgerFormat(
        format=LEDGER_FORMAT,
        events={
            name: cls.class_version
            for name, cls in sorted(EVENT_TYPES.items())
            if cls.__module__.split(".")[0] == "events"
        },
        owlclaw=release,
    )


def unreadable(recorded: LedgerFormat, running: LedgerFormat) -> list[str]:
    """What of ``recorded`` the ``running`` OwlClaw cannot read, in words (empty: it can)."""
    found = []
    if recorded.format > running.format:
        found.append(f"ledger format {recorded.format} (this OwlClaw reads up to {running.format})")
    for name, class_version in sorted(recorded.events.items()):
        known = running.events.get(name)
        if known is None:
            found.append(f"event type {name} (unknown to this OwlClaw)")
        elif class_version > known:
            found.append(f"{name} version {class_version} (this OwlClaw reads up to {known})")
    return found


def is_newer(running: LedgerFormat, recorded: LedgerFormat) -> bool:
    """Whether ``running`` writes what ``recorded`` does not say (given that it reads all of
    ``recorded``): then the ledger records ``running`` from now on."""
    return running.format != recorded.format or running.events != recorded.events


class LedgerTooNew(LedgerError):
    """The ledger was written by a newer OwlClaw than this one: opening it is refused."""

    def __init__(self, recorded: LedgerFormat, running: LedgerFormat):
        self.recorded = recorded
        self.running = running
        super().__init__(
            f"this ledger was written by OwlClaw {recorded.owlclaw} (ledger format "
            f"{recorded.format}), newer than this OwlClaw {running.owlclaw} (ledger format "
            f"{running.format}), which cannot read "
            + "; ".join(unreadable(recorded, running))
            + f": upgrade OwlClaw to {recorded.owlclaw} or later to open it"
        )
