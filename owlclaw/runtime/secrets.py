"""Which environment variables hold an app's secrets, and their values now: what the ledger
and the traces redact (``events.redaction``).

An app names them in ``[secrets] env``, and implicitly: the variables its channels, MCP servers
and A2A peers read headers from (``headers_env``), its heartbeat databases' URLs
(``url_env``), its web search key (``search_key_env``), the entries of an MCP server's ``env``
whose name looks like a secret's, and any variable of the process with such a name (the
provider keys litellm reads: ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``,
``LANGFUSE_SECRET_KEY``...).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from events.redaction import MIN_SECRET_CHARS
from owlclaw.a2a.peers import a2a_peers
from owlclaw.app import AgentApp, AppError
from owlclaw.heartbeat.config import url_variables
from owlclaw.mcp.config import mcp_servers
from owlclaw.struct_errors import describe
from owlclaw.tools.pack.config import ToolsConfig

SECRET_NAME = re.compile(
    r"(_API_KEY|_SECRET_KEY|_SECRET_ACCESS_KEY|_SESSION_TOKEN|_AUTH_TOKEN|_ACCESS_TOKEN"
    r"|_API_TOKEN|_PASSWORD|_SECRET)$"
)
"""A variable whose name ends so holds a secret wherever it is set."""
EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class SecretsTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[secrets]`` table of an app's owlclaw.toml."""

    env: tuple[EnvName, ...] = ()
    """Environment variables whose values are secrets: each must be set, with a value of at
    least ``MIN_SECRET_CHARS`` characters, or the app is refused."""


def declared(config: Mapping[str, Any], source: str = "owlclaw.toml") -> tuple[str, ...]:
    """The variables ``[secrets] env`` names; AppError naming ``source`` when it is invalid."""
    table = config.get("secrets", {})
    try:
        return msgspec.convert(table, SecretsTable).env
    except msgspec.ValidationError as e:
        raise AppError(f"{source}: {describe(e, SecretsTable, table, 'secrets')}") from e


def implicit(config: Mapping[str, Any], source: str = "owlclaw.toml") -> dict[str, str]:
    """Variable -> where the app names it, for the secrets it names without ``[secrets]``;
    an MCP server's own ``env`` entry is named ``mcp.<server>.<VAR>`` (its value is there)."""
    names: dict[str, str] = {}
    tools = ToolsConfig.from_app_config(config, source)
    for channel, settings in tools.channels.items():
        for var in settings.headers_env.values():
            names.setdefault(var, f"[tools.channels.{channel}] headers_env")
    names.setdefault(tools.web.search_key_env, "[tools.web] search_key_env")
    for server, mcp in mcp_servers(config, source).items():
        for var in mcp.headers_env.values():
            names.setdefault(var, f"[mcp.servers.{server}] headers_env")
    for peer, remote in a2a_peers(config, source).items():
        for var in remote.headers_env.values():
            names.setdefault(var, f"[a2a.peers.{peer}] headers_env")
    for var, where in url_variables(config).items():
        names.setdefault(var, where)
    return names


def secret_values(app: AgentApp | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Name -> value of every secret set now: the app's (declared and implicit) and the
    process's variables named like secrets."""
    values = {name: value for name, value in environ.items() if SECRET_NAME.search(name)}
    if app is None:
        return values
    config = app.config
    for name in (*declared(config), *implicit(config)):
        if environ.get(name):
            values[name] = environ[name]
    for server, mcp in mcp_servers(config).items():
        for var, value in mcp.env.items():
            if SECRET_NAME.search(var):
                values[f"mcp.{server}.{var}"] = value
    return values


def too_short(secrets: Mapping[str, str]) -> list[str]:
    """The names whose values are too short to redact: they stay in what is recorded."""
    return sorted(name for name, value in secrets.items() if len(value) < MIN_SECRET_CHARS)


def check_declared(app: AgentApp, environ: Mapping[str, str] = os.environ) -> None:
    """Refuse (AppError) an app whose ``[secrets] env`` names a variable that is not set, or
    whose value is too short to redact: the secret it meant would reach the ledger (a
    misspelled name protects nothing), so serving it is refused, not warned about."""
    source = str(app.root / "owlclaw.toml")
    names = declared(app.config, source)
    if unset := [n for n in names if not environ.get(n)]:
        raise AppError(
            f"{source}: [secrets] env names {', '.join(unset)}, not set in the environment: "
            "set it, or remove it from the list"
        )
    if short := [n for n in names if len(environ[n]) < MIN_SECRET_CHARS]:
        raise AppError(
            f"{source}: [secrets] env: the value of {', '.join(short)} has fewer than "
            f"{MIN_SECRET_CHARS} characters, too short to redact without shredding text; "
            "use a longer secret"
        )
