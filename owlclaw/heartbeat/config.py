"""The ``[heartbeat]`` table of an app's owlclaw.toml: the databases its sources read (each
named, its URL in an environment variable) and the sources themselves, by name.

Strict like the rest of owlclaw.toml: an unknown key or source kind, a source naming a database
the table does not, a channel that is not an identifier, or sources without a heartbeat to
check them refuse the app, naming the table and key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from owlclaw.app import AgentSettings, AppError
from owlclaw.struct_errors import describe, unknown_name

NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
"""A PostgreSQL channel name: an identifier of at most 63 bytes."""
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
Timeout = Annotated[float, msgspec.Meta(gt=0, le=300)]


class DatabaseRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A database the app's sources read: its libpq URL is read from ``url_env`` (a secret:
    never in owlclaw.toml, redacted from the ledger)."""

    url_env: Annotated[str, msgspec.Meta(pattern=ENV_NAME)]


class SqlSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Wakes the agent when ``query`` counts more than 0: the first column of its first row (no
    row, or NULL, counts 0). It runs as one statement in a read-only transaction whose
    statement timeout is the source's timeout."""

    kind: Literal["sql"]
    database: str
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)]
    timeout_s: Timeout | None = None


class ListenSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Wakes the agent when a notification arrived on ``channel`` since the last beat (the
    source holds one connection that LISTENs; what arrives while it is disconnected is lost)."""

    kind: Literal["listen"]
    database: str
    channel: Annotated[str, msgspec.Meta(pattern=IDENTIFIER)]
    timeout_s: Timeout | None = None


Source = SqlSource | ListenSource
KINDS: dict[str, type[SqlSource] | type[ListenSource]] = {"sql": SqlSource, "listen": ListenSource}


class HeartbeatTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    timeout_s: Timeout = 5.0
    """Each source's time limit, for sources that set none: one that takes longer counts as
    failed (it does not wake the agent) and the others are not held up."""
    databases: dict[Annotated[str, msgspec.Meta(pattern=NAME)], DatabaseRef] = {}
    sources: dict[Annotated[str, msgspec.Meta(pattern=NAME)], dict[str, Any]] = {}


class HeartbeatSources(msgspec.Struct, frozen=True):
    """The app's sources by name, each with its database's URL variable and its time limit."""

    sources: dict[str, Source]
    url_envs: dict[str, str]
    """Source name -> the environment variable holding its database's URL."""
    timeouts: dict[str, float]

    def __bool__(self) -> bool:
        return bool(self.sources)


def heartbeat_sources(
    config: Mapping[str, Any], settings: AgentSettings, source: str = "owlclaw.toml"
) -> HeartbeatSources:
    """The app's heartbeat sources; AppError naming ``source`` and the table when the
    ``[heartbeat]`` table is invalid."""
    raw = config.get("heartbeat", {})
    try:
        table = msgspec.convert(raw, HeartbeatTable)
    except msgspec.ValidationError as e:
        raise AppError(f"{source}: {describe(e, HeartbeatTable, raw, 'heartbeat')}") from e
    sources = {name: _source(name, spec, table, source) for name, spec in table.sources.items()}
    if sources and settings.heartbeat_s <= 0:
        raise AppError(
            f"{source}: [heartbeat] sources are checked by the heartbeat, which is off: set "
            "[agent] heartbeat_s above 0"
        )
    return HeartbeatSources(
        sources=sources,
        url_envs={n: table.databases[s.database].url_env for n, s in sources.items()},
        timeouts={n: s.timeout_s or table.timeout_s for n, s in sources.items()},
    )


def _source(name: str, spec: dict[str, Any], table: HeartbeatTable, source: str) -> Source:
    where = f"[heartbeat.sources.{name}]"
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        problem = (
            unknown_name("source kind", str(kind), KINDS)
            if kind
            else f"kind is missing (one of: {', '.join(sorted(KINDS))})"
        )
        raise AppError(f"{source}: {where} {problem}")
    try:
        parsed = msgspec.convert(spec, KINDS[kind])
    except msgspec.ValidationError as e:
        raise AppError(f"{source}: {where} {describe(e, KINDS[kind], spec, toml=False)}") from e
    if parsed.database not in table.databases:
        problem = unknown_name("database", parsed.database, table.databases)
        raise AppError(f"{source}: {where} database: {problem} (in [heartbeat.databases])")
    return parsed


def check_urls(
    sources: HeartbeatSources, where: str, environ: Mapping[str, str] = os.environ
) -> None:
    """Refuse (AppError) sources whose database URL variable is not set: they could never be
    checked, and the heartbeat would only ever report them failed."""
    unset = sorted({var for var in sources.url_envs.values() if not environ.get(var)})
    if unset:
        raise AppError(
            f"{where}: [heartbeat.databases] url_env names {', '.join(unset)}, not set in the "
            "environment"
        )


def url_variables(config: Mapping[str, Any]) -> dict[str, str]:
    """Variable -> where the app names it, for each ``[heartbeat.databases]`` URL (secrets:
    a URL may hold a password). Silent on a malformed table (``heartbeat_sources`` refuses it)."""
    table = config.get("heartbeat", {})
    databases = table.get("databases", {}) if isinstance(table, dict) else None
    if not isinstance(databases, dict):
        return {}
    return {
        ref["url_env"]: f"[heartbeat.databases.{name}] url_env"
        for name, ref in databases.items()
        if isinstance(ref, dict) and isinstance(ref.get("url_env"), str)
    }
