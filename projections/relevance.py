"""How recall ranks memories: similarity weighted by age.

Its own module because it is pure scoring, with no database: recall ranks by it today, and the
audit's as-of view ranks a past moment's memories by the same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from projections.provenance import Provenance


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
    source: Provenance | None = None
    """The event it came from (recall sets it; a past moment's memories have none)."""


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
