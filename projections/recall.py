"""Recall: the memories of one agent most relevant to a query, from the memory view.

Its own module because it is the runtime's read path (the MemoryStore it is given), apart from
the view's table upkeep and the MEMORY.md files.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError

from projections.embedders import EmbeddingUnavailable, embedder_for
from projections.locks import channel
from projections.memory import MemoryView, vector_literal
from projections.provenance import Provenance
from projections.relevance import Candidate, Memory, rank

MIN_LIMIT, MAX_LIMIT = 1, 20


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
            rows, sources = self._nearest(agent_id, query, limit * self.CANDIDATES_PER_RESULT)
        except (psycopg.Error, PersistenceError, EmbeddingUnavailable) as e:
            return RecallResult([], f"memory index unavailable, recall returned nothing: {e}")
        ranked = rank(rows, now or datetime.now(UTC), self.half_life_seconds, limit, min_similarity)
        return RecallResult([replace(m, source=sources[m.memory_id]) for m in ranked], warning)

    def _nearest(
        self, agent_id: str, query: str, candidates: int
    ) -> tuple[list[Candidate], dict[UUID, Provenance]]:
        """Embed the query in the serving index's vector space and search it.

        The search runs in one transaction that first locks the view's tables (in the order a
        switch-over drops them), so a model switch cannot swap the index between reading its
        model and querying. The query is embedded outside that transaction: loading the model (a
        fresh ``owlclaw memory`` process) or calling an embedding API can take longer than the
        database lets a transaction sit idle, and PostgreSQL then ended the search with nothing.
        So the first pass only reads the index's model; the query is embedded with it; the
        second pass searches if the model is still the one the query was embedded with (after a
        switch in between, it embeds again). With each candidate, where it came from.
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
                    return [], {}  # nothing to rank: no need to load the model and embed it
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
                            " SELECT m.memory_id, m.content, m.tags, m.created_at, 1 - n.distance,"
                            " m.run_id, m.run_no, m.step, m.call_id, m.version, m.position,"
                            " m.event_hash FROM nearest n JOIN {memories} m USING (memory_id)"
                        ),
                        {"q": embedded[1], "a": agent_id, "k": candidates},
                    )
                    rows = cur.fetchall()
                    return (
                        [
                            (r[0], view.ledger.sealer.open(r[1]), r[2], r[3], float(r[4]))
                            for r in rows
                        ],
                        {r[0]: _provenance(r[5:]) for r in rows},
                    )
            embedder = view.embedder
            if model != embedder.model:
                embedder = embedder_for(model, dimensions)
            embedded = (model, vector_literal(embedder.embed([query])[0]))

    def wait_for(self, position: int, timeout: float) -> bool:
        """Block until the memory view has absorbed ``position``; False on timeout."""
        view = self.view
        if (view.max_tracking_id(view.tracking_name) or 0) >= position:
            return True
        deadline = time.monotonic() + timeout
        with view.ledger.database.listen(channel(view.name)) as conn:
            while (view.max_tracking_id(view.tracking_name) or 0) < position:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                for _ in conn.notifies(timeout=min(remaining, 0.05), stop_after=1):
                    pass
        return True


def _provenance(row: Sequence[Any]) -> Provenance:
    run_id, run_no, step, call_id, version, position, event_hash = row
    hash_hex = bytes(event_hash).hex() if event_hash is not None else ""
    return Provenance(run_id, run_no, step, call_id, version, position, hash_hex)
