"""Memory view: one row per MemoryRemembered with a pgvector embedding.

Embeddings are computed before the batch's transaction opens (``prepare``), in batches. A
memory leaves recall when the runtime archives it (MemoryArchived, at the agent's memory limit)
and when the agent's active memories exceed the MEMORY.md size limit (its oldest ones); archived
memories move to MEMORY.archive.md. A forgotten memory (MemoryForgotten) leaves the view; the
ledger keeps it. Every decision depends only on the ledger, so a rebuild gives the same rows.

For the age policy (projections.memory_ages) each row keeps when it was last recalled (the
memories a ``recall`` call returned, ToolCallSucceeded, and those recalled into a run's prompt,
its first LLMResponded's ``inputs``; a recall recorded after the memory was archived does not
count) and when and why it was archived. MemoryExpired (the policy's deletion) leaves the view
like a forgotten memory.

Each row keeps its provenance (projections.provenance): the run, the step whose ``remember``
call recorded it, the event's stream version and its hash as stored, traced in ``prepare``.
Rows projected before these columns existed show none until ``owlclaw projections rebuild
memory``.

With ``memory_dir`` set, the view keeps each agent's MEMORY.md and MEMORY.archive.md in
``memory_dir/<agent>/`` current: after each batch commits, the files of the agents it changed are
rewritten atomically (a temp file in the same directory, fsync, rename).

Content is stored as the ledger stores it: sealed under the memory's data key
(``events.sealing``), never in plaintext, and opened on read (recall, MEMORY.md). An erased
memory (DataErased) leaves the view, its vector with it, and its agent's MEMORY.md is rewritten.

Recall over these rows is projections.recall (ranked by projections.relevance); the MEMORY.md
files are rendered by projections.memory_files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import Composable, Literal

from events import catalog as ev
from events.catalog import LedgerEvent
from events.errors import LedgerReadError
from events.ledger import Ledger
from events.ledger_log import LoggedEvent
from projections.embedders import Embedder, embedder_for
from projections.locks import lock_key
from projections.memory_files import agent_directory, render_entry, write_memory_files
from projections.provenance import Step, remembered_steps
from projections.sqlvalues import text
from projections.view import View

MEMORY_MD_LIMIT_BYTES = 10 * 1024 * 1024
RECALLS = (ev.ToolCallSucceeded, ev.LLMResponded)
"""The events that may record recalls (a ``recall`` call's result, a prompt's memories)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryAge:
    """What the age policy reads of one memory."""

    agent_id: str
    memory_id: UUID
    last_used: datetime
    """When it was remembered or last recalled, whichever is later."""
    archived_at: datetime | None
    """When it left recall (None: active)."""


@dataclass(frozen=True)
class ArchivedMemory:
    """An archived memory as ``owlclaw memory --archived`` lists it."""

    memory_id: UUID
    content: str
    tags: list[str]
    created_at: datetime
    last_recalled: datetime | None
    archived_at: datetime | None
    """None in rows archived before the view kept it (version 3), until it is rebuilt."""
    reason: str


def vector_literal(values: Sequence[float]) -> str:
    """An embedding as a pgvector text literal (what the view stores and recall queries by)."""
    return "[" + ",".join(f"{x:.7g}" for x in values) + "]"


class MemoryView(View):
    name: ClassVar[str] = "memory"
    version: ClassVar[int] = 4
    """2: each memory carries its provenance (run, step, call, version, hash); 3: its content
    sealed as in the ledger; 4: when it was last recalled, archived and why (the age policy)."""
    tables: ClassVar[tuple[str, ...]] = ("memories", "memory_agents", "memory_index_meta")
    indexes: ClassVar[tuple[str, ...]] = ("memories_agent",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (
        ev.MemoryRemembered,
        ev.MemoryArchived,
        ev.MemoryForgotten,
        ev.MemoryExpired,
        ev.DataErased,
        ev.ToolCallSucceeded,
        ev.LLMResponded,
    )
    ddl: ClassVar[tuple[str, ...]] = (
        "CREATE EXTENSION IF NOT EXISTS vector",
        "CREATE TABLE IF NOT EXISTS {memories} ("
        " memory_id uuid PRIMARY KEY, agent_id text NOT NULL, content text NOT NULL,"
        " tags text[] NOT NULL, run_id uuid NOT NULL, created_at timestamptz NOT NULL,"
        " position bigint NOT NULL, bytes integer NOT NULL,"
        " archived boolean NOT NULL DEFAULT false, embedding halfvec({dim}) NOT NULL)",
        # Covering index: recall reads an agent's vectors from contiguous index pages
        # (index-only scan) instead of heap rows scattered among other agents' memories.
        "CREATE INDEX IF NOT EXISTS {memories_agent} ON {memories}"
        " (agent_id) INCLUDE (archived, memory_id, embedding)",
        # Provenance: the step of the run that remembered it (0/'' unknown, see
        # projections.provenance), the MemoryRemembered's stream version and stored hash.
        "ALTER TABLE {memories} ADD COLUMN IF NOT EXISTS run_no integer NOT NULL DEFAULT 0,"
        " ADD COLUMN IF NOT EXISTS step integer NOT NULL DEFAULT 0,"
        " ADD COLUMN IF NOT EXISTS call_id text NOT NULL DEFAULT '',"
        " ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0,"
        " ADD COLUMN IF NOT EXISTS event_hash bytea",
        "ALTER TABLE {memories} ADD COLUMN IF NOT EXISTS last_recalled timestamptz,"
        " ADD COLUMN IF NOT EXISTS archived_at timestamptz,"
        " ADD COLUMN IF NOT EXISTS archive_reason text NOT NULL DEFAULT ''",
        "CREATE TABLE IF NOT EXISTS {memory_agents} ("
        " agent_id text PRIMARY KEY, active_bytes bigint NOT NULL)",
        # changed: the log position of the agent's last change; rendered: the change its
        # MEMORY.md files show (behind it: rewritten after the batch commits).
        "ALTER TABLE {memory_agents} ADD COLUMN IF NOT EXISTS changed bigint NOT NULL DEFAULT 0,"
        " ADD COLUMN IF NOT EXISTS rendered bigint NOT NULL DEFAULT 0",
        "CREATE TABLE IF NOT EXISTS {memory_index_meta} ("
        " model text NOT NULL, dimensions int NOT NULL)",
        "INSERT INTO {memory_index_meta} SELECT {model}, {dim}"
        " WHERE NOT EXISTS (SELECT 1 FROM {memory_index_meta})",
    )

    def __init__(
        self,
        ledger: Ledger,
        *,
        rebuilding: bool = False,
        embedder: Embedder | None = None,
        size_limit: int = MEMORY_MD_LIMIT_BYTES,
        memory_dir: Path | None = None,
    ):
        self.embedder = embedder or embedder_for("local/all-MiniLM-L6-v2")
        self.size_limit = size_limit
        self.memory_dir = memory_dir
        """Where each agent's MEMORY.md is kept current (None: only ``render_memory_files``)."""
        self._vectors: dict[UUID, str] = {}
        self._steps: dict[UUID, Step] = {}
        self._hashes: dict[tuple[UUID, int], bytes] = {}
        super().__init__(ledger, rebuilding=rebuilding)

    @property
    def placeholders(self) -> Mapping[str, Composable]:
        return {"dim": Literal(self.embedder.dimensions), "model": Literal(self.embedder.model)}

    def committed(self, batch: list[LoggedEvent]) -> None:
        """Rewrite the files of the agents changed so far, after a batch with memory events (a
        batch of none, or of recalls only: nothing in the files changed)."""
        changes = any(not isinstance(e.event, RECALLS) for e in batch)
        if changes and self.memory_dir is not None and not self.rebuilding:
            self.render_changed(self.memory_dir)

    def switched_over(self) -> None:
        if self.memory_dir is not None:
            self.render_changed(self.memory_dir)

    def render_changed(self, memory_dir: Path) -> list[str]:
        """Rewrite the memory files of every agent changed since they were last written; the
        agents whose files were written.

        Under the projection's lock, so a batch cannot change the rows in between and two
        writers cannot leave an older rendering last. A file that cannot be written (a
        read-only directory) is logged and skipped: the view goes on, and the agent's next
        change (or ``owlclaw memory``) writes it again.
        """
        written = []
        with self.transaction(commit=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_key(self),))
            changed = curs.execute(
                self.sql(
                    "SELECT agent_id, changed FROM {memory_agents} WHERE changed > rendered"
                    " ORDER BY agent_id"
                )
            ).fetchall()
            for row in changed:
                agent_id = row["agent_id"]
                try:
                    write_memory_files(curs, self, agent_id, agent_directory(memory_dir, agent_id))
                    written.append(agent_id)
                except (OSError, ValueError) as e:
                    log.error("memory view: MEMORY.md of agent %r not written: %s", agent_id, e)
                curs.execute(
                    self.sql("UPDATE {memory_agents} SET rendered = %s WHERE agent_id = %s"),
                    (row["changed"], agent_id),
                )
        return written

    def prepare(self, batch: list[LoggedEvent]) -> None:
        memories = [e.event for e in batch if isinstance(e.event, ev.MemoryRemembered)]
        vectors = self.embedder.embed([m.content for m in memories])
        self._vectors = {
            m.memory_id: vector_literal(v) for m, v in zip(memories, vectors, strict=True)
        }
        self._steps = self._trace(memories)
        self._hashes = self._stored_hashes(memories)

    def _stored_hashes(self, memories: list[ev.MemoryRemembered]) -> dict[tuple[UUID, int], bytes]:
        """Each memory's event hash as the ledger keeps it: in the table, or (a rebuild reading
        an archived run) in the run's archive file."""
        keys = [(m.originator_id, m.originator_version) for m in memories]
        hashes = self.ledger.chains.event_hashes(keys)
        missing = {k for k in keys if k not in hashes}
        if missing:
            streams = list(dict.fromkeys(stream for stream, _ in missing))
            rows = self.ledger.chains.chain_rows(streams)
            hashes |= {(r[0], r[1]): bytes(r[6]) for r in rows if (r[0], r[1]) in missing}
        return hashes

    def _trace(self, memories: list[ev.MemoryRemembered]) -> dict[UUID, Step]:
        """Each memory's step, from its run's stream (read once per run). A run stream that
        does not decode gives its memories no step: the memory still reaches recall, and
        ``owlclaw verify`` / ``owlclaw why`` say what is wrong with the stream."""
        steps: dict[UUID, Step] = {}
        by_run: dict[UUID, list[tuple[int, UUID]]] = {}
        for m in memories:
            by_run.setdefault(m.originator_id, []).append((m.originator_version, m.memory_id))
        for run_id, recorded in by_run.items():
            try:
                run = self.ledger.stream(run_id)
            except LedgerReadError as e:
                log.warning("memory view: run %s not traced: %s", run_id, e)
                run = []
            steps |= remembered_steps(run, recorded)
        return steps

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e = logged.event
        if isinstance(e, ev.MemoryRemembered):
            self._remembered(curs, e, logged.position)
        elif isinstance(e, ev.MemoryArchived):
            self._archived(curs, e, logged.position)
        elif isinstance(e, ev.MemoryForgotten):
            self._forgotten(curs, [e.memory_id], logged.position)
        elif isinstance(e, ev.MemoryExpired):
            self._forgotten(curs, e.memory_ids, logged.position)
        elif isinstance(e, ev.ToolCallSucceeded) and e.tool == "recall":
            self._recalled(curs, _returned(e.result), e.timestamp)
        elif isinstance(e, ev.LLMResponded) and isinstance(e.inputs.get("memories"), dict):
            self._recalled(curs, _uuids(e.inputs["memories"]), e.timestamp)
        elif isinstance(e, ev.DataErased) and e.memory_ids:
            self._forgotten(curs, e.memory_ids, logged.position)

    def _recalled(self, curs: Cursor[Any], memory_ids: list[UUID], at: datetime) -> None:
        """Recalled at ``at``: archived memories are not revived by a recall recorded late."""
        if memory_ids:
            curs.execute(
                self.sql(
                    "UPDATE {memories} SET last_recalled = greatest(last_recalled, %s)"
                    " WHERE memory_id = ANY(%s) AND NOT archived"
                ),
                (at, memory_ids),
            )

    def _archived(self, curs: Cursor[Any], e: ev.MemoryArchived, position: int) -> None:
        curs.execute(
            self.sql(
                "WITH gone AS (UPDATE {memories} SET archived = true, archived_at = %(at)s,"
                "   archive_reason = %(reason)s"
                "   WHERE memory_id = ANY(%(ids)s) AND NOT archived RETURNING agent_id, bytes)"
                " UPDATE {memory_agents} a SET active_bytes = a.active_bytes - g.bytes,"
                "   changed = %(p)s"
                " FROM (SELECT agent_id, sum(bytes) AS bytes FROM gone GROUP BY agent_id) g"
                " WHERE a.agent_id = g.agent_id"
            ),
            {"ids": e.memory_ids, "p": position, "at": e.timestamp, "reason": e.reason},
        )

    def _forgotten(self, curs: Cursor[Any], memory_ids: list[UUID], position: int) -> None:
        """Forgotten or erased memories leave the view (their vectors with them)."""
        curs.execute(
            self.sql(
                "WITH gone AS (DELETE FROM {memories} WHERE memory_id = ANY(%(ids)s)"
                "   RETURNING agent_id, CASE WHEN archived THEN 0 ELSE bytes END AS bytes)"
                " UPDATE {memory_agents} a SET active_bytes = a.active_bytes - g.bytes,"
                "   changed = %(p)s"
                " FROM (SELECT agent_id, sum(bytes) AS bytes FROM gone GROUP BY agent_id) g"
                " WHERE a.agent_id = g.agent_id"
            ),
            {"ids": memory_ids, "p": position},
        )

    def _remembered(self, curs: Cursor[Any], e: ev.MemoryRemembered, position: int) -> None:
        content = text(e.content) or ""
        tags = [text(t) or "" for t in e.tags]
        step = self._steps[e.memory_id]
        size = len(render_entry(e.memory_id, e.timestamp, tags, content, step.reference()).encode())
        curs.execute(
            self.sql(
                "INSERT INTO {memories} (memory_id, agent_id, content, tags, run_id, created_at,"
                " position, bytes, embedding, run_no, step, call_id, version, event_hash)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::halfvec, %s, %s, %s, %s, %s)"
                " ON CONFLICT (memory_id) DO NOTHING"
            ),
            (
                e.memory_id,
                text(e.agent_id),
                text(self.ledger.sealer.stored(e, "content")) or "",
                tags,
                e.originator_id,
                e.timestamp,
                position,
                size,
                self._vectors[e.memory_id],
                step.run_no,
                step.step,
                text(step.call_id) or "",
                e.originator_version,
                self._hashes.get((e.originator_id, e.originator_version)),
            ),
        )
        curs.execute(
            self.sql(
                "INSERT INTO {memory_agents} (agent_id, active_bytes, changed) VALUES (%s, %s, %s)"
                " ON CONFLICT (agent_id) DO UPDATE SET"
                " active_bytes = {memory_agents}.active_bytes + excluded.active_bytes,"
                " changed = excluded.changed"
            ),
            (text(e.agent_id), size, position),
        )
        curs.execute(
            self.sql(
                "WITH over AS (SELECT 1 FROM {memory_agents} WHERE agent_id = %(a)s"
                "   AND active_bytes > %(limit)s),"
                " newest_first AS (SELECT memory_id, sum(bytes) OVER"
                "   (ORDER BY created_at DESC, position DESC) AS cumulative FROM {memories}"
                "   WHERE agent_id = %(a)s AND NOT archived AND EXISTS (SELECT 1 FROM over)),"
                " archived AS (UPDATE {memories} m SET archived = true, archived_at = %(at)s,"
                "   archive_reason = %(reason)s FROM newest_first n"
                "   WHERE m.memory_id = n.memory_id AND n.cumulative > %(limit)s"
                "   RETURNING m.bytes)"
                " UPDATE {memory_agents} SET active_bytes = active_bytes"
                "   - (SELECT coalesce(sum(bytes), 0) FROM archived) WHERE agent_id = %(a)s"
            ),
            {
                "a": text(e.agent_id),
                "limit": self.size_limit,
                "at": e.timestamp,
                "reason": f"MEMORY.md over its limit of {self.size_limit} bytes",
            },
        )

    # --- reading ------------------------------------------------------------------------------

    def memory_ages(self) -> Iterator[MemoryAge]:
        """Every memory's last use and archive time, for the age policy."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT agent_id, memory_id, greatest(created_at, last_recalled) AS used,"
                    " CASE WHEN archived THEN archived_at END AS at"
                    " FROM {memories} WHERE NOT archived OR archived_at IS NOT NULL"
                    " ORDER BY agent_id, created_at, position"
                )
            ).fetchall()
        for r in rows:
            yield MemoryAge(r["agent_id"], r["memory_id"], r["used"], r["at"])

    def archived_memories(self, agent_id: str) -> list[ArchivedMemory]:
        """The agent's archived memories, oldest first, their content opened."""
        with self.transaction(commit=False) as curs:
            rows = curs.execute(
                self.sql(
                    "SELECT memory_id, content, tags, created_at, last_recalled, archived_at,"
                    " archive_reason FROM {memories} WHERE agent_id = %s AND archived"
                    " ORDER BY created_at, position"
                ),
                (agent_id,),
            ).fetchall()
        return [
            ArchivedMemory(
                r["memory_id"],
                self.ledger.sealer.open(r["content"]),
                list(r["tags"]),
                r["created_at"],
                r["last_recalled"],
                r["archived_at"],
                r["archive_reason"],
            )
            for r in rows
        ]


def _returned(result: Any) -> list[UUID]:
    """The memory ids a recall call returned (none from a result cut to a text, or erased)."""
    memories = result.get("memories") if isinstance(result, dict) else None
    if not isinstance(memories, list):
        return []
    return _uuids(m.get("memory_id") for m in memories if isinstance(m, dict))


def _uuids(values: Any) -> list[UUID]:
    ids = []
    for v in values:
        try:
            ids.append(UUID(str(v)))
        except ValueError:
            continue
    return ids
