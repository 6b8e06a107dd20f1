"""Memory view: one row per MemoryRemembered with a pgvector embedding, recall, and MEMORY.md.

Embeddings are computed before the batch's transaction opens (``prepare``), in batches. A
memory leaves recall when the runtime archives it (MemoryArchived, at the agent's memory limit)
and when the agent's active memories exceed the MEMORY.md size limit (its oldest ones); archived
memories move to MEMORY.archive.md. A forgotten memory (MemoryForgotten) leaves the view; the
ledger keeps it. Every decision depends only on the ledger, so a rebuild gives the same rows.

With ``memory_dir`` set, the view keeps each agent's MEMORY.md and MEMORY.archive.md in
``memory_dir/<agent>/`` current: after each batch commits, the files of the agents it changed are
rewritten atomically (a temp file in the same directory, fsync, rename).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from psycopg import Cursor
from psycopg.sql import Composable, Literal

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger import Ledger, LoggedEvent
from projections.embedders import Embedder, EmbeddingUnavailable, embedder_for
from projections.runner import channel, lock_key
from projections.sqlvalues import text
from projections.view import View

MEMORY_MD_LIMIT_BYTES = 10 * 1024 * 1024
MIN_LIMIT, MAX_LIMIT = 1, 20
NOTE = "<!-- rendered by OwlClaw from the ledger; edits are lost -->"

log = logging.getLogger(__name__)


def _vector(values: Sequence[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in values) + "]"


def render_entry(memory_id: UUID, created_at: datetime, tags: Sequence[str], content: str) -> str:
    """One MEMORY.md entry. Content sits in a tilde fence longer than any run inside it, so it
    stays inert text whatever it contains."""
    longest = max((len(m) for m in re.findall(r"~+", content)), default=0)
    fence = "~" * max(4, longest + 1)
    stamp = created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    tag_line = ", ".join(tags) if tags else "-"
    return f"## {stamp} · {memory_id}\n\ntags: {tag_line}\n\n{fence}text\n{content}\n{fence}\n\n"


class MemoryView(View):
    name: ClassVar[str] = "memory"
    tables: ClassVar[tuple[str, ...]] = ("memories", "memory_agents", "memory_index_meta")
    indexes: ClassVar[tuple[str, ...]] = ("memories_agent",)
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (
        ev.MemoryRemembered,
        ev.MemoryArchived,
        ev.MemoryForgotten,
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
        super().__init__(ledger, rebuilding=rebuilding)

    @property
    def placeholders(self) -> Mapping[str, Composable]:
        return {"dim": Literal(self.embedder.dimensions), "model": Literal(self.embedder.model)}

    def committed(self, batch: list[LoggedEvent]) -> None:
        """Rewrite the files of the agents changed so far, after a batch of memory events (a
        batch of none: other events moved the log on; nothing to write)."""
        if batch and self.memory_dir is not None and not self.rebuilding:
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
        self._vectors = {m.memory_id: _vector(v) for m, v in zip(memories, vectors, strict=True)}

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e = logged.event
        if isinstance(e, ev.MemoryRemembered):
            self._remembered(curs, e, logged.position)
        elif isinstance(e, ev.MemoryArchived):
            self._archived(curs, e.memory_ids, logged.position)
        elif isinstance(e, ev.MemoryForgotten):
            self._forgotten(curs, e.memory_id, logged.position)

    def _archived(self, curs: Cursor[Any], memory_ids: list[UUID], position: int) -> None:
        curs.execute(
            self.sql(
                "WITH gone AS (UPDATE {memories} SET archived = true"
                "   WHERE memory_id = ANY(%(ids)s) AND NOT archived RETURNING agent_id, bytes)"
                " UPDATE {memory_agents} a SET active_bytes = a.active_bytes - g.bytes,"
                "   changed = %(p)s"
                " FROM (SELECT agent_id, sum(bytes) AS bytes FROM gone GROUP BY agent_id) g"
                " WHERE a.agent_id = g.agent_id"
            ),
            {"ids": memory_ids, "p": position},
        )

    def _forgotten(self, curs: Cursor[Any], memory_id: UUID, position: int) -> None:
        curs.execute(
            self.sql(
                "WITH gone AS (DELETE FROM {memories} WHERE memory_id = %(id)s"
                "   RETURNING agent_id, CASE WHEN archived THEN 0 ELSE bytes END AS bytes)"
                " UPDATE {memory_agents} a SET active_bytes = a.active_bytes - g.bytes,"
                "   changed = %(p)s FROM gone g WHERE a.agent_id = g.agent_id"
            ),
            {"id": memory_id, "p": position},
        )

    def _remembered(self, curs: Cursor[Any], e: ev.MemoryRemembered, position: int) -> None:
        content = text(e.content) or ""
        tags = [text(t) or "" for t in e.tags]
        size = len(render_entry(e.memory_id, e.timestamp, tags, content).encode())
        curs.execute(
            self.sql(
                "INSERT INTO {memories} (memory_id, agent_id, content, tags, run_id, created_at,"
                " position, bytes, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::halfvec)"
                " ON CONFLICT (memory_id) DO NOTHING"
            ),
            (
                e.memory_id,
                text(e.agent_id),
                content,
                tags,
                e.originator_id,
                e.timestamp,
                position,
                size,
                self._vectors[e.memory_id],
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
                " archived AS (UPDATE {memories} m SET archived = true FROM newest_first n"
                "   WHERE m.memory_id = n.memory_id AND n.cumulative > %(limit)s"
                "   RETURNING m.bytes)"
                " UPDATE {memory_agents} SET active_bytes = active_bytes"
                "   - (SELECT coalesce(sum(bytes), 0) FROM archived) WHERE agent_id = %(a)s"
            ),
            {"a": text(e.agent_id), "limit": self.size_limit},
        )


@dataclass(frozen=True)
class Memory:
    memory_id: UUID
    content: str
    tags: list[str]
    created_at: datetime
    similarity: float
    relevance: float
    """Similarity weighted by age: similarity * decay."""
    decay: float
    """The age weight: 0.5 ** (age / half-life)."""


@dataclass(frozen=True)
class RecallResult:
    memories: list[Memory] = field(default_factory=list)
    warning: str | None = None
    """Set when recall degraded (index unavailable, view behind): memories may be incomplete."""


Candidate = tuple[UUID, str, Sequence[str], datetime, float]
"""A memory found near a query: memory_id, content, tags, created_at, cosine similarity."""


def rank(
    candidates: Sequence[Candidate],
    now: datetime,
    half_life_seconds: float,
    limit: int,
    min_similarity: float | None = None,
) -> list[Memory]:
    """The ``limit`` most relevant ``candidates`` as of ``now``: similarity weighted by age
    (0.5 ** (age / half-life)), newest first among equals; those less similar than
    ``min_similarity`` left out. What recall ranks by, today or as of a past moment."""
    memories = [
        Memory(
            memory_id=memory_id,
            content=content,
            tags=list(tags),
            created_at=created_at,
            similarity=round(float(similarity), 6),
            relevance=round(float(similarity) * decay, 6),
            decay=round(decay, 6),
        )
        for memory_id, content, tags, created_at, similarity in candidates
        if min_similarity is None or float(similarity) >= min_similarity
        for decay in (0.5 ** (max(0.0, (now - created_at).total_seconds()) / half_life_seconds),)
    ]
    memories.sort(key=lambda m: (-m.relevance, -m.created_at.timestamp()))
    return memories[:limit]


class MemoryStore:
    """Recall over the memory view, strictly per agent.

    The search is exact over the agent's own active memories (an index-only scan of a B-tree on
    agent_id that carries the half-precision vectors, then cosine distance): every query carries
    the agent filter, so no query can return another agent's
    memory, and it always returns ``limit`` rows when the agent has them. An agent holds at most
    10,000 memories, which bounds the cost (see ``owlclaw bench projections``).
    """

    CANDIDATES_PER_RESULT = 4

    def __init__(self, view: MemoryView, *, half_life_days: float = 30.0, wait_s: float = 1.0):
        self.view = view
        self.half_life_seconds = half_life_days * 86400.0
        self.wait_s = wait_s
        """How long a recall waits for the view to absorb ``after_position``, unless told."""

    def recall(
        self,
        agent_id: str,
        query: str,
        limit: int = 5,
        *,
        after_position: int | None = None,
        timeout: float | None = None,
        now: datetime | None = None,
        min_similarity: float | None = None,
    ) -> RecallResult:
        """Memories of ``agent_id`` most relevant to ``query``.

        ``after_position``: wait (at most ``timeout`` s, by default the store's ``wait_s``) until
        the view has absorbed that log position, so a memory remembered earlier in the same run
        is found.
        ``min_similarity``: leave out memories less similar to the query than this (the
        relevance floor), however few remain.
        """
        if not MIN_LIMIT <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between {MIN_LIMIT} and {MAX_LIMIT}, got {limit}")
        warning = None
        try:
            wait_s = self.wait_s if timeout is None else timeout
            if after_position is not None and not self.wait_for(after_position, wait_s):
                warning = f"memory index has not reached log position {after_position} yet"
            rows = self._nearest(agent_id, query, limit * self.CANDIDATES_PER_RESULT)
        except (psycopg.Error, PersistenceError, EmbeddingUnavailable) as e:
            return RecallResult([], f"memory index unavailable, recall returned nothing: {e}")
        ranked = rank(rows, now or datetime.now(UTC), self.half_life_seconds, limit, min_similarity)
        return RecallResult(ranked, warning)

    def _nearest(self, agent_id: str, query: str, candidates: int) -> list[Candidate]:
        """Embed the query in the serving index's vector space and search it.

        The search runs in one transaction that first locks the view's tables (in the order a
        switch-over drops them), so a model switch cannot swap the index between reading its
        model and querying. The query is embedded outside that transaction: loading the model (a
        fresh ``owlclaw memory`` process) or calling an embedding API can take longer than the
        database lets a transaction sit idle, and PostgreSQL then ended the search with nothing.
        So the first pass only reads the index's model; the query is embedded with it; the
        second pass searches if the model is still the one the query was embedded with (after a
        switch in between, it embeds again).
        """
        view = self.view
        embedded: tuple[str, str] | None = None  # (model, query vector)
        while True:
            with view.connection() as conn, conn.transaction():
                cur = conn.cursor(row_factory=psycopg.rows.tuple_row)
                cur.execute(
                    view.sql("LOCK TABLE {memories}, {memory_index_meta} IN ACCESS SHARE MODE")
                )
                cur.execute(
                    view.sql(
                        "SELECT EXISTS (SELECT FROM {memories} WHERE agent_id = %s"
                        " AND NOT archived)"
                    ),
                    (agent_id,),
                )
                exists = cur.fetchone()
                if exists is None or not exists[0]:
                    return []  # nothing to rank: no need to load the model and embed the query
                cur.execute(view.sql("SELECT model, dimensions FROM {memory_index_meta}"))
                meta = cur.fetchone()
                model, dimensions = meta or (view.embedder.model, view.embedder.dimensions)
                if embedded is not None and embedded[0] == model:
                    cur.execute(
                        view.sql(
                            "WITH nearest AS (SELECT memory_id,"
                            "  embedding <=> %(q)s::halfvec AS distance"
                            "  FROM {memories} WHERE agent_id = %(a)s AND NOT archived"
                            "  ORDER BY distance LIMIT %(k)s)"
                            " SELECT m.memory_id, m.content, m.tags, m.created_at, 1 - n.distance"
                            " FROM nearest n JOIN {memories} m USING (memory_id)"
                        ),
                        {"q": embedded[1], "a": agent_id, "k": candidates},
                    )
                    return [(r[0], r[1], r[2], r[3], float(r[4])) for r in cur.fetchall()]
            embedder = view.embedder
            if model != embedder.model:
                embedder = embedder_for(model, dimensions)
            embedded = (model, _vector(embedder.embed([query])[0]))

    def wait_for(self, position: int, timeout: float) -> bool:
        """Block until the memory view has absorbed ``position``; False on timeout."""
        view = self.view
        if (view.max_tracking_id(view.tracking_name) or 0) >= position:
            return True
        deadline = time.monotonic() + timeout
        with view.ledger.listen(channel(view.name)) as conn:
            while (view.max_tracking_id(view.tracking_name) or 0) < position:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                for _ in conn.notifies(timeout=min(remaining, 0.05), stop_after=1):
                    pass
        return True


def agent_directory(memory_dir: Path, agent_id: str) -> Path:
    """``memory_dir/<agent_id>``; an agent id that is not one plain path component is refused
    (ValueError), so no agent's files land outside its own directory."""
    if agent_id in ("", ".", "..") or Path(agent_id).name != agent_id or "\\" in agent_id:
        raise ValueError(f"agent id {agent_id!r} cannot name a directory")
    return memory_dir / agent_id


def write_atomically(path: Path, content: str) -> None:
    """Replace ``path`` with ``content`` all at once: a reader sees the old file or the new one,
    never a part, and a crash leaves one of them (temp file in the same directory, fsync,
    rename)."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_memory_files(
    curs: Cursor[Any], view: MemoryView, agent_id: str, directory: Path
) -> tuple[Path, Path]:
    """Write MEMORY.md (active memories) and MEMORY.archive.md (archived) for one agent from the
    view as ``curs`` sees it. Forgotten memories are in neither.

    Entries are ordered by time then log position; the same view always gives the same bytes.
    """
    rows = curs.execute(
        view.sql(
            "SELECT memory_id, created_at, tags, content, archived FROM {memories}"
            " WHERE agent_id = %s ORDER BY created_at, position"
        ),
        (agent_id,),
    ).fetchall()
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / "MEMORY.md", directory / "MEMORY.archive.md")
    for path, archived in zip(paths, (False, True), strict=True):
        title = f"# {path.name} — {agent_id}\n\n{NOTE}\n\n"
        body = "".join(
            render_entry(r["memory_id"], r["created_at"], r["tags"], r["content"])
            for r in rows
            if r["archived"] == archived
        )
        write_atomically(path, title + body)
    return paths


def render_memory_files(view: MemoryView, agent_id: str, directory: Path) -> tuple[Path, Path]:
    """Write MEMORY.md and MEMORY.archive.md for one agent into ``directory`` now."""
    with view.transaction(commit=False) as curs:
        return write_memory_files(curs, view, agent_id, directory)
