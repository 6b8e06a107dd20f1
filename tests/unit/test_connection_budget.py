"""Every pool that connects to OwlClaw's PostgreSQL fits in its max_connections at once."""

from __future__ import annotations

from owlclaw import connections as budget
from owlclaw.connections import HATCHET_API, HATCHET_ENGINE, owlclaw_processes


def test_all_pools_at_their_maximum_fit_in_max_connections() -> None:
    processes = owlclaw_processes()
    used = (
        budget.RESERVED
        + HATCHET_ENGINE.total
        + HATCHET_API.total
        + processes * budget.PER_OWLCLAW_PROCESS
    )
    assert used <= budget.MAX_CONNECTIONS
    # owlclaw run, its Hatchet worker, `timers serve`, four shared hosts and two CLI commands
    assert processes >= 9


def test_postgres_default_of_100_was_too_small_for_the_same_pools() -> None:
    assert owlclaw_processes(100) < 9


def test_the_engine_is_told_the_pool_sizes_it_is_counted_for() -> None:
    env = HATCHET_ENGINE.env()
    assert int(env["DATABASE_MAX_CONNS"]) == HATCHET_ENGINE.main
    assert int(env["DATABASE_DDL_POOL_MAX_CONNS"]) == HATCHET_ENGINE.ddl
    assert int(env["SERVER_MSGQUEUE_PUBSUB_POSTGRES_MAX_CONNS"]) == HATCHET_ENGINE.pubsub
    assert HATCHET_ENGINE.total == HATCHET_ENGINE.main + HATCHET_ENGINE.ddl + HATCHET_ENGINE.pubsub
