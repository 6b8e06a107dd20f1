"""Synthetic memories for ``owlclaw bench projections``: bulk rows written straight into the
memory view's table (random unit vectors, no ledger events), and the bare index query that
recall's search runs, to time it apart from embedding and ranking."""

from __future__ import annotations

from uuid import UUID

from projections.memory import MemoryView


def fill_memories(view: MemoryView, target: str, count: int, agents: int, per_agent: int) -> None:
    """Insert ``count`` memories over ``agents`` agents, ``per_agent`` of them ``target``'s,
    interleaved as in real use, then VACUUM ANALYZE the table."""
    with view.connection() as conn:
        conn.execute(
            view.sql(
                "INSERT INTO {memories} (memory_id, agent_id, content, tags, run_id, created_at,"
                " position, bytes, embedding)"
                " SELECT gen_random_uuid(),"
                "  CASE WHEN g %% %(stride)s = 0 THEN %(target)s"
                "   ELSE 'bench-agent-' || (g %% %(agents)s) END,"
                "  'synthetic memory ' || g, ARRAY['bench'], gen_random_uuid(),"
                "  now() - (g || ' seconds')::interval, 0, 100,"
                "  (SELECT l2_normalize(array_agg(random() - 0.5)::vector)::halfvec"
                "     FROM generate_series(1, %(dim)s) WHERE g > 0)"
                " FROM generate_series(1, %(n)s) g"
            ),
            {
                "stride": count // per_agent,
                "target": target,
                "agents": agents - 1,
                "dim": view.embedder.dimensions,
                "n": count,
            },
        )
        conn.execute(view.sql("VACUUM ANALYZE {memories}"))


def nearest_ids(view: MemoryView, agent_id: str, vector: str, limit: int) -> list[UUID]:
    """The ids of the agent's ``limit`` active memories nearest to ``vector`` (pgvector text)."""
    with view.connection() as conn:
        rows = conn.execute(
            view.sql(
                "SELECT memory_id FROM {memories} WHERE agent_id = %s AND NOT archived"
                " ORDER BY embedding <=> %s::halfvec LIMIT %s"
            ),
            (agent_id, vector, limit),
        ).fetchall()
    return [row["memory_id"] for row in rows]
