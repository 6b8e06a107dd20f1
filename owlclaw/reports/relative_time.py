"""Times a person reads at a glance (``in 23 h``, ``5 min ago``), shared by the CLI's tables
and the console's pages so both say the same thing of the same moment."""

from __future__ import annotations

from datetime import UTC, datetime


def relative(moment: datetime | str, now: datetime | None = None) -> str:
    """``in 23 h``, ``5 min ago``: whole units, rounded down (the exact time is shown
    elsewhere: ``--json``, a page's tooltip)."""
    when = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    size = int(abs(seconds))  # a moment ago is "0 s ago", not "in 0 s"
    for unit, length in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if size >= length:
            text = f"{size // length} {unit}"
            break
    else:
        text = f"{size} s"
    return f"in {text}" if seconds >= 0 else f"{text} ago"
