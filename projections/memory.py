"""Memory view: one row per MemoryRemembered with a pgvector embedding, recall, and MEMORY.md.

Embeddings are computed before the batch's transaction opens (``prepare``), in batches. When an
agent's active memories exceed the MEMORY.md size limit, its oldest ones are archived: they leave
the active set that recall searches and move to MEMORY.archive.md. The decision depends only
on the ledger, so a rebuild archives exactly the same memories.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore
from psycopg import Cursor
from psycopg.sql import Composable, Identifier, Literal

from events import catalog as ev
from events.catalog import LedgerEvent
from events.ledger import LoggedEvent
from events.recorder import connect_kwargs
from projections.embedders import Embedder, EmbeddingUnavailable, embedder_for
from projections.runner import channel
from projections.sqlvalues import text
from projections.view import View

MEMORY_MD_LIMIT_BYTES = 10 * 1024 * 1024
MIN_LIMIT, MAX_LIMIT = 1, 20


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
    events: ClassVar[tuple[type[LedgerEvent], ...]] = (ev.MemoryRemembered,)
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
        "CREATE TABLE IF NOT EXISTS {memory_index_meta} ("
        " model text NOT NULL, dimensions int NOT NULL)",
        "INSERT INTO {memory_index_meta} SELECT {model}, {dim}"
        " WHERE NOT EXISTS (SELECT 1 FROM {memory_index_meta})",
    )

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        rebuilding: bool = False,
        embedder: Embedder | None = None,
        size_limit: int = MEMORY_MD_LIMIT_BYTES,
    ):
        self.embedder = embedder or embedder_for("local/all-MiniLM-L6-v2")
        self.size_limit = size_limit
        self._vectors: dict[UUID, str] = {}
        super().__init__(datastore, rebuilding=rebuilding)

    @property
    def placeholders(self) -> Mapping[str, Composable]:
        return {"dim": Literal(self.embedder.dimensions), "model": Literal(self.embedder.model)}

    def prepare(self, batch: list[LoggedEvent]) -> None:
        memories = [e.event for e in batch if isinstance(e.event, ev.MemoryRemembered)]
        vectors = self.embedder.embed([m.content for m in memories])
        self._vectors = {m.memory_id: _vector(v) for m, v in zip(memories, vectors, strict=True)}

    def apply(self, curs: Cursor[Any], logged: LoggedEvent) -> None:
        e = logged.event
        if not isinstance(e, ev.MemoryRemembered):
            return
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
                logged.position,
                size,
                self._vectors[e.memory_id],
            ),
        )
        curs.execute(
            self.sql(
                "INSERT INTO {memory_agents} VALUES (%s, %s) ON CONFLICT (agent_id)"
                " DO UPDATE SET active_bytes = {memory_agents}.active_bytes + excluded.active_bytes"
            ),
            (text(e.agent_id), size),
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
    """Similarity weighted by age: similarity * 0.5 ** (age / half-life)."""


@dataclass(frozen=True)
class RecallResult:
    memories: list[Memory] = field(default_factory=list)
    warning: str | None = None
    """Set when recall degraded (index unavailable, view behind): memories may be incomplete."""


class MemoryStore:
    """Recall over the memory view, strictly per agent.

    The search is exact over the agent's own active memories (an index-only scan of a B-tree on
    agent_id that carries the half-precision vectors, then cosine distance): every query carries
    the agent filter, so no query can return another agent's
    memory, and it always returns ``limit`` rows when the agent has them. An agent holds at most
    10,000 memories, which bounds the cost (see ``owlclaw bench projections``).
    """

    CANDIDATES_PER_RESULT = 4

    def __init__(self, view: MemoryView, *, half_life_days: float = 30.0):
        self.view = view
        self.half_life_seconds = half_life_days * 86400.0

    def recall(
        self,
        agent_id: str,
        query: str,
        limit: int = 5,
        *,
        after_position: int | None = None,
        timeout: float = 1.0,
        now: datetime | None = None,
    ) -> RecallResult:
        """Memories of ``agent_id`` most relevant to ``query``.

        ``after_position``: wait (at most ``timeout`` s) until the view has absorbed that log
        position, so a memory remembered earlier in the same run is found.
        """
        if not MIN_LIMIT <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between {MIN_LIMIT} and {MAX_LIMIT}, got {limit}")
        warning = None
        try:
            if after_position is not None and not self.wait_for(after_position, timeout):
                warning = f"memory index has not reached log position {after_position} yet"
            rows = self._nearest(agent_id, query, limit * self.CANDIDATES_PER_RESULT)
        except (psycopg.Error, PersistenceError, EmbeddingUnavailable) as e:
            return RecallResult([], f"memory index unavailable, recall returned nothing: {e}")
        now = now or datetime.now(UTC)
        memories = [
            Memory(
                memory_id=r[0],
                content=r[1],
                tags=list(r[2]),
                created_at=r[3],
                similarity=round(float(r[4]), 6),
                relevance=round(float(r[4]) * self._decay(now, r[3]), 6),
            )
            for r in rows
        ]
        memories.sort(key=lambda m: (-m.relevance, -m.created_at.timestamp()))
        return RecallResult(memories[:limit], warning)

    def _decay(self, now: datetime, created_at: datetime) -> float:
        age = max(0.0, (now - created_at).total_seconds())
        return float(0.5 ** (age / self.half_life_seconds))

    def _nearest(self, agent_id: str, query: str, candidates: int) -> list[tuple[Any, ...]]:
        """Embed the query in the serving index's vector space and search it.

        The search runs in one transaction that first locks the view's tables (in the order a
        switch-over drops them), so a model switch cannot swap the index between reading its
        model and querying. The query is embedded outside that transaction: loading the model (a
        fresh ``owlclaw memory`` process) or calling an embedding API can take longer than the
        datastore lets a transaction sit idle, and PostgreSQL then ended the search with nothing.
        So the first pass only reads the index's model; the query is embedded with it; the
        second pass searches if the model is still the one the query was embedded with (after a
        switch in between, it embeds again).
        """
        view = self.view
        embedded: tuple[str, str] | None = None  # (model, query vector)
        while True:
            with view.datastore.get_connection() as conn, conn.transaction():
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
                    return cur.fetchall()
            embedder = view.embedder
            if model != embedder.model:
                embedder = embedder_for(model, dimensions)
            embedded = (model, _vector(embedder.embed([query])[0]))

    def count(self, agent_id: str) -> int:
        """How many memories (active and archived) the view holds for the agent."""
        with self.view.datastore.get_connection() as conn:
            row = conn.execute(
                self.view.sql("SELECT count(*) AS n FROM {memories} WHERE agent_id = %s"),
                (agent_id,),
            ).fetchone()
        return int(row["n"]) if row else 0

    def wait_for(self, position: int, timeout: float) -> bool:
        """Block until the memory view has absorbed ``position``; False on timeout."""
        view = self.view
        if (view.max_tracking_id(view.tracking_name) or 0) >= position:
            return True
        deadline = time.monotonic() + timeout
        with psycopg.connect(**connect_kwargs(view.datastore), autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("LISTEN {}").format(Identifier(channel(view.name))))
            while (view.max_tracking_id(view.tracking_name) or 0) < position:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                for _ in conn.notifies(timeout=min(remaining, 0.05), stop_after=1):
                    pass
        return True


def render_memory_files(view: MemoryView, agent_id: str, directory: Path) -> tuple[Path, Path]:
    """Write MEMORY.md (active memories) and MEMORY.archive.md (archived) for one agent.

    Entries are ordered by time then log position; the same view always gives the same bytes.
    """
    with view.datastore.get_connection() as conn:
        rows = conn.execute(
            view.sql(
                "SELECT memory_id, created_at, tags, content, archived FROM {memories}"
                " WHERE agent_id = %s ORDER BY created_at, position"
            ),
            (agent_id,),
        ).fetchall()
    note = "<!-- rendered by OwlClaw from the ledger; edits are lost -->"
    active = [r for r in rows if not r["archived"]]
    archived = [r for r in rows if r["archived"]]
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / "MEMORY.md", directory / "MEMORY.archive.md")
    for path, entries in ((paths[0], active), (paths[1], archived)):
        title = f"# {path.name} — {agent_id}\n\n{note}\n\n"
        body = "".join(
            render_entry(r["memory_id"], r["created_at"], r["tags"], r["content"]) for r in entries
        )
        path.write_text(title + body, encoding="utf-8")
    return paths
