"""Start-up validation of the apps ``owlclaw run`` is given, before the service starts anything.

An app is checked the way its host will load it: its files and limits (``load_app``: SOUL.md,
IDENTITY.md, owlclaw.toml's tables, sizes; SOUL.md, IDENTITY.md and the skill names within the
system prompt's token budget), its ``[governance]``, ``[tools]``, ``[mcp]``, ``[heartbeat]`` and
``[secrets]`` tables (each secret and heartbeat database URL it names set, each secret long enough
to redact), its handlers.py (the
time-limited child-process probe of ``AppCode``, nothing imported here) and its tools' names
(none twice; every name governance gives is a tool of the app, or of one of its MCP servers,
which list their tools only once they run). An invalid app is refused at start with its file
and field named, instead of every one of its runs failing later.

The apps checked are the directories named on the command line: the service serves exactly
those (any other agent in the ledger is ``NotServed``) and records their app_dir in the ledger
when it starts. A change to an app while the service runs is the reloader's business (a broken
new version keeps the old one, with an AgentWarning).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from owlclaw.a2a.peers import peer_tools
from owlclaw.app import AgentApp, AppError, AppNotFound, load_app
from owlclaw.config import RuntimeConfig
from owlclaw.heartbeat.config import check_urls, heartbeat_sources
from owlclaw.mcp.config import mcp_servers
from owlclaw.runtime.app_code import probe
from owlclaw.runtime.prompt import check_core
from owlclaw.runtime.secrets import check_declared
from owlclaw.runtime.toolset import check_governance_names, tool_kinds
from owlclaw.tools.governance import Governance
from owlclaw.tools.pack.config import ToolsConfig


class InvalidApps(AppError):
    """Some apps did not validate; ``problems`` holds one message per invalid app."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def validate_app(
    root: Path, load_timeout_s: float, limits: RuntimeConfig | None = None
) -> AgentApp:
    """The loaded app; AppError naming the file (and field) of the first problem found
    (with ``limits``: also a core too large for the system prompt's budget)."""
    app = load_app(root)
    if limits is not None:
        check_core(app, limits, limits.models)
    source = str(app.root / "owlclaw.toml")
    try:
        governance = Governance.from_app_config(app.config, source=source)
        tools = ToolsConfig.from_app_config(app.config, source=source)
        peers = peer_tools(app.config, source)
    except ValueError as e:
        raise AppError(str(e)) from e
    servers = mcp_servers(app.config, source)
    check_urls(heartbeat_sources(app.config, app.settings, source), source)
    check_declared(app)
    capabilities: list[str] = []
    if app.handlers is not None:
        capabilities = probe(app.handlers, app.handlers.read_text(encoding="utf-8"), load_timeout_s)
    pack = {*tools.enabled(), *peers}
    check_governance_names(governance, tool_kinds(capabilities, pack), source, servers)
    return app


def validate_apps(
    roots: Iterable[Path], load_timeout_s: float, limits: RuntimeConfig | None = None
) -> list[AgentApp]:
    """Every app validated, or InvalidApps with one message per invalid one (a directory that
    does not exist is AppNotFound at once)."""
    apps: list[AgentApp] = []
    problems: list[str] = []
    for root in roots:
        try:
            apps.append(validate_app(root, load_timeout_s, limits))
        except AppNotFound:
            raise
        except AppError as e:
            problems.append(str(e))
    if problems:
        raise InvalidApps(problems)
    return apps
