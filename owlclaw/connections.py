"""The PostgreSQL connection budget: every pool that connects to OwlClaw's server, sized in one
place so that all of them at their maximum fit in the server's ``max_connections``.

Beyond ``max_connections`` PostgreSQL refuses new connections ("too many clients"): the Hatchet
engine then fails to schedule and fires come seconds late. The embedded server is started with
``MAX_CONNECTIONS``; the local Hatchet engine's processes get their pool sizes from ``HATCHET``;
each OwlClaw process holds one ledger pool and a few connections of its own (LISTEN for feeds and
projections), ``PER_OWLCLAW_PROCESS`` in all, and ``owlclaw_processes()`` of them fit in the rest.
"""

from __future__ import annotations

import msgspec

from events.ledger import CONNECTIONS

MAX_CONNECTIONS = 400
"""The embedded server's ``max_connections`` (PostgreSQL's default, 100, is what ran out)."""
RESERVED = 10
"""Left free: ``superuser_reserved_connections`` (3) and an operator's psql or pg_dump."""
OWN_CONNECTIONS = 6
"""Connections an OwlClaw process opens outside its ledger pool (LISTEN of feeds, projections,
a server's serving locks, an agent host's tenant slots)."""
PER_OWLCLAW_PROCESS = CONNECTIONS + OWN_CONNECTIONS


class HatchetPools(msgspec.Struct, frozen=True):
    """The pools of one Hatchet process (``pkg/config/loader`` at v0.104.7 opens three: the main
    pool, the DDL pool and the Postgres pub/sub pool)."""

    main: int
    ddl: int = 2
    pubsub: int = 3

    @property
    def total(self) -> int:
        return self.main + self.ddl + self.pubsub

    def env(self) -> dict[str, str]:
        """The environment variables the engine reads for these pools."""
        return {
            "DATABASE_MAX_CONNS": str(self.main),
            "DATABASE_MIN_CONNS": "1",
            "DATABASE_DDL_POOL_MAX_CONNS": str(self.ddl),
            "DATABASE_DDL_POOL_MIN_CONNS": "1",
            "SERVER_MSGQUEUE_PUBSUB_POSTGRES_MAX_CONNS": str(self.pubsub),
            "SERVER_MSGQUEUE_PUBSUB_POSTGRES_MIN_CONNS": "1",
        }


HATCHET_ENGINE = HatchetPools(main=40)
"""The engine: scheduler, ticker, dispatcher, controllers (Hatchet's default main pool is 50)."""
HATCHET_API = HatchetPools(main=10)
"""The REST API: schedule registration and listings."""
HATCHET = HATCHET_ENGINE.total + HATCHET_API.total


def owlclaw_processes(max_connections: int = MAX_CONNECTIONS) -> int:
    """How many OwlClaw processes (server, Hatchet worker, agent host actors, CLI) fit next to
    the Hatchet engine with every pool at its maximum."""
    return (max_connections - RESERVED - HATCHET) // PER_OWLCLAW_PROCESS
