"""A materialised view of the ledger: its tables and how each event changes them.

A view is a tracking recorder in the ledger's database (events.tracking): its rows and its
tracking position (the last log position it absorbed) change in the same transaction, so a crash
between two events can neither lose nor double one. Code outside ``projections`` reads a view
through its query methods, never with SQL of its own.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composable, Composed, Identifier

from events.catalog import LedgerEvent
from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from events.tracking import LedgerTrackingRecorder
from projections.parked import ERRORS_DDL
from projections.versions import VERSIONS_DDL, record_on_creation

TRACKING_TABLE = "projection_tracking"
REBUILD_SUFFIX = "__rebuild"


class View(LedgerTrackingRecorder):
    """Base class of the projections' views.

    Subclasses name their tables in ``tables`` and write DDL and statements with ``{table}``
    placeholders (``self.t["table"]``), so that a rebuild can build the same view into fresh
    tables next to the serving ones.
    """

    name: ClassVar[str]
    tables: ClassVar[tuple[str, ...]]
    indexes: ClassVar[tuple[str, ...]] = ()
    """Names of the secondary indexes in ``ddl`` (renamed along with the tables on a switch)."""
    events: ClassVar[tuple[type[LedgerEvent], ...]]
    """The event types the view reads; others are filtered out in the database."""
    ddl: ClassVar[tuple[str, ...]]
    version: ClassVar[int] = 1
    """The version of the view's code: raise it when a change to ``ddl`` or ``apply`` means
    the tables must be built again from the log. A service that starts a view whose tables an
    older version built rebuilds them in the background (projections.versions)."""

    def __init__(self, ledger: Ledger, *, rebuilding: bool = False):
        super().__init__(ledger, tracking_table_name=TRACKING_TABLE)
        self.rebuilding = rebuilding
        self.tracking_name = self.name + (REBUILD_SUFFIX if rebuilding else "")
        self.suffix = REBUILD_SUFFIX if rebuilding else ""
        self.t: Mapping[str, Identifier] = {
            name: Identifier(name + self.suffix) for name in (*self.tables, *self.indexes)
        }
        if not rebuilding:  # a rebuild records its version as it switches over
            self.sql_create_statements.append(SQL(VERSIONS_DDL).format())
            self.sql_create_statements.append(
                record_on_creation(self.name, self.tables[0], self.version)
            )
        self.sql_create_statements.extend(self.sql(ddl) for ddl in self.ddl)
        self.sql_create_statements.append(SQL(ERRORS_DDL).format())

    @property
    def placeholders(self) -> Mapping[str, Composable]:
        """Values for ``{name}`` placeholders in this view's SQL besides table names."""
        return {}

    def sql(self, text: str) -> Composed:
        """A statement of this view with its table names (and placeholders) filled in."""
        return SQL(text).format(**self.t, **self.placeholders)

    def prepare(self, batch: list[LoggedEvent]) -> None:
        """Work for a batch done before its transaction opens (e.g. computing embeddings).

        Called again before each retry of a batch that failed and for each event applied alone,
        so whatever a view gathers for ``committed`` starts afresh here."""

    def committed(self, batch: list[LoggedEvent]) -> None:
        """Work after a batch's transaction committed (e.g. recording what the view did)."""

    def switched_over(self) -> None:
        """Work once a rebuild's tables have become the serving ones (e.g. rewriting files the
        rebuild did not write while its tables were not serving)."""

    @abstractmethod
    def apply(self, curs: Cursor[DictRow], logged: LoggedEvent) -> None:
        """Change the view for one event (inside the batch's transaction)."""

    def drop_tables(self, curs: Cursor[DictRow]) -> None:
        for table in self.tables:
            curs.execute(SQL("DROP TABLE IF EXISTS {} CASCADE").format(self.t[table]))

    def rename_into(self, curs: Cursor[DictRow], other: View) -> None:
        """Give this view's tables and indexes the names of ``other``'s (dropped) ones."""
        for table in self.tables:
            curs.execute(SQL("ALTER TABLE {} RENAME TO {}").format(self.t[table], other.t[table]))
            curs.execute(
                SQL("ALTER INDEX IF EXISTS {} RENAME TO {}").format(
                    Identifier(f"{table}{self.suffix}_pkey"),
                    Identifier(f"{table}{other.suffix}_pkey"),
                )
            )
        for index in self.indexes:
            curs.execute(SQL("ALTER INDEX {} RENAME TO {}").format(self.t[index], other.t[index]))
