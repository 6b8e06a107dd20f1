"""The columns of the CLI's tables, so that each table reads in 80 columns.

Rich fits a table to the terminal by narrowing the columns that may wrap. Here only free text
may: what a user copies into another command (an id, a name, a run number, a log position),
numbers and times stay whole on one line, and free text folds into the width left. So each
table keeps its whole columns narrower than 80 together (two values stacked in one cell,
details printed under the table)."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.table import Column, Table
from rich.text import Text

if TYPE_CHECKING:
    from projections.memory import ArchivedMemory
    from projections.relevance import Memory


def whole(header: str, *, right: bool = False) -> Column:
    """Never cut nor wrapped: Rich narrows the free-text columns instead."""
    return Column(header, justify="right" if right else "left", no_wrap=True)


def text(header: str) -> Column:
    """Free text (a focus, a reason, an error, event data): folded into the width left."""
    return Column(header, overflow="fold")


def stacked(*lines: str | Text | None) -> Text:
    """Values stacked in one cell, each on its own line (None: left out), as plain text."""
    return Text("\n").join(Text(line) if isinstance(line, str) else line for line in lines if line)


def recall_table(title: str, memories: "list[Memory]") -> Table:
    """Recalled memories, most relevant first, each one's tags under its content and where it
    came from (``run 12, step 3``: ``owlclaw why`` walks there) under its date."""
    table = Table(
        *(whole(c, right=True) for c in ("relevance", "similarity", "decay")),
        whole("when"),
        text("memory"),
        title=title,
    )
    for m in memories:
        table.add_row(
            f"{m.relevance:.3f}",
            f"{m.similarity:.3f}",
            f"{m.decay:.3f}",
            stacked(m.created_at.strftime("%Y-%m-%d"), m.source.reference() if m.source else None),
            stacked(m.content, Text(f"tags: {', '.join(m.tags)}", "dim") if m.tags else None),
        )
    return table


def archived_table(
    title: str,
    memories: "list[ArchivedMemory]",
    deletes_on: "Callable[[ArchivedMemory], datetime | None]",
) -> Table:
    """Archived memories, oldest first: when each was remembered, last recalled, archived and
    will be deleted (``deletes_on``: None when never), its content and why it was archived."""
    table = Table(whole("memory"), whole("dates"), text("content"), title=title)
    for m in memories:
        deleted = deletes_on(m)
        table.add_row(
            str(m.memory_id),
            stacked(
                f"remembered {_day(m.created_at)}",
                f"recalled   {_day(m.last_recalled) if m.last_recalled else 'never'}",
                f"archived   {_day(m.archived_at) if m.archived_at else '?'}",
                f"deleted    {_day(deleted) if deleted else 'never'}",
            ),
            stacked(m.content, Text(m.reason, "dim") if m.reason else None),
        )
    return table


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d")
