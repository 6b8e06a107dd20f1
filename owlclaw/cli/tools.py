"""``owlclaw tools``: an agent's tool usage, and the operator's switches for its tools."""

import getpass
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from owlclaw.cli.common import (
    EXIT_USAGE,
    JsonOption,
    app,
    err,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    server_client,
)
from owlclaw.cli.tables import stacked, whole
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.messages import ToolsChange

if TYPE_CHECKING:
    from events import Ledger
    from owlclaw.mcp.config import McpServer
    from owlclaw.tools.tool import Tool
    from projections.tool_calls import ToolStats


@app.command()
@handles_errors
def tools(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    enable: Annotated[
        list[str] | None,
        typer.Option("--enable", metavar="NAME", help="Enable a disabled tool (repeatable)."),
    ] = None,
    disable: Annotated[
        list[str] | None,
        typer.Option(
            "--disable",
            metavar="NAME",
            help="Hide a tool from the agent's next runs and refuse calls to it (repeatable).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Per tool of an agent: calls, errors by code, timeouts, p50/p95 duration, truncations
    (the audit view). --enable/--disable NAME record a ToolsChanged that the agent's next run
    obeys: through `owlclaw run` when it serves the agent, else directly in the ledger."""
    config = load_config()
    if enable or disable:
        change, via = _change(config, agent, enable or [], disable or [])
        if as_json:
            print_json(
                {
                    "agent_id": agent,
                    "disabled": change.disabled,
                    "position": change.position,
                    "via": via,
                }
            )
            return
        if change.position is None:
            out.print(f"{agent}: nothing to change", highlight=False)
        else:
            writer = "the agent's server" if via == "server" else "the ledger directly"
            out.print(
                f"[green]recorded[/] ToolsChanged for {agent} at log position"
                f" {change.position} (through {writer})",
                highlight=False,
            )
        out.print(f"disabled tools: {', '.join(change.disabled) or 'none'}", highlight=False)
        return
    _print_stats(config, agent, as_json)


def _change(
    config: OwlClawConfig, agent: str, enable: list[str], disable: list[str]
) -> tuple[ToolsChange, str]:
    """Through the agent's writer when a server serves it, else directly in the ledger."""
    from owlclaw.client import ServerRefused, ServerUnavailable
    from owlclaw.tools.switches import change_tools_directly

    hint = f"`owlclaw tools {agent}` shows its tools; check the names"
    with server_client(config) as client:
        try:
            return client.change_tools(agent, enable, disable), "server"
        except ServerUnavailable:
            pass
        except ServerRefused as e:
            if e.code in ("unknown_tool", "bad_request"):
                fail(str(e), hint, EXIT_USAGE)
            if e.code != "unknown_agent":
                raise
    with open_ledger(config) as (_, led):
        known = list(
            app_tools(led, agent, config.runtime.app_load_timeout_s, config.workspaces_path)
        )
        try:
            by = f"local:{getpass.getuser()}"  # no principal: someone with the database
            return change_tools_directly(led, agent, known, enable, disable, by), "ledger"
        except ValueError as e:
            fail(str(e), hint, EXIT_USAGE)


def app_tools(led: "Ledger", agent: str, timeout_s: float, workspaces: Path) -> "dict[str, Tool]":
    """The tools of the agent's app as it is on disk (built-in tools only without one), its MCP
    servers' as they list them now; its handlers.py is loaded the way a host loads it, with the
    time limit."""
    from owlclaw.app import load_app
    from owlclaw.mcp.config import mcp_servers
    from owlclaw.runtime.app_code import AppCode
    from owlclaw.runtime.toolset import agent_tools
    from owlclaw.tools.capabilities import Registry
    from owlclaw.tools.pack.config import ToolsConfig, pack_tools

    app_dir = led.load_agent(agent).state.app_dir
    registry, pack, mcp = Registry(), {}, {}
    if app_dir and Path(app_dir).is_dir():
        loaded = load_app(Path(app_dir))
        if loaded.handlers:
            registry = AppCode(timeout_s).load(loaded.handlers)
        pack = pack_tools(ToolsConfig.from_app_config(loaded.config), workspaces)
        mcp = listed(mcp_servers(loaded.config))[0]
    return agent_tools(registry.capabilities, pack, mcp)


def _print_stats(config: OwlClawConfig, agent: str, as_json: bool) -> None:
    from owlclaw.compose.read import open_view
    from owlclaw.reports.inspection import bring_up_to_date
    from owlclaw.tools.stats import tool_stats
    from projections.tool_calls import AuditView

    with open_ledger(config) as (_, led):
        state = led.load_agent(agent).state
        disabled = state.disabled_tools
        view = open_view(led, config, AuditView)
        behind = bring_up_to_date(led, view)
        stats = tool_stats(view, agent)
    servers = mcp_status(Path(state.app_dir)) if state.app_dir else {}
    if as_json:
        print_json(
            {
                "agent_id": agent,
                "disabled": disabled,
                "warning": behind,
                "tools": stats,
                "mcp_servers": servers,
            }
        )
        return
    if behind:
        err.print(f"[yellow]warning:[/] {behind}")
    print_stats_table(agent, stats, disabled)
    for name, server in servers.items():
        tools = ", ".join(server["tools"]) or "none"
        out.print(f"MCP server {escape(name)}: {escape(server['status'])}", highlight=False)
        out.print(f"  tools: {escape(tools)}", highlight=False)


def mcp_status(app_dir: Path) -> dict[str, dict[str, Any]]:
    """Each MCP server of the app on disk, connected now (each within its ``timeout_s``): its
    state (ready, or why it is unavailable) and the tools the agent gets from it."""
    from owlclaw.app import AppError, load_app
    from owlclaw.mcp.config import SEPARATOR, mcp_servers

    try:
        servers = mcp_servers(load_app(app_dir).config, str(app_dir / "owlclaw.toml"))
    except AppError:
        return {}  # the app does not load: runs say why (AppLoadFailed)
    tools, status = listed(servers)
    return {
        name: {
            "status": status[name],
            "tools": sorted(t for t in tools if t.startswith(f"{name}{SEPARATOR}")),
        }
        for name in servers
    }


def listed(servers: "Mapping[str, McpServer]") -> "tuple[dict[str, Tool], dict[str, str]]":
    """The tools of ``servers`` as they list them now, and each server's status; connected
    for this (each within its ``timeout_s``) and closed again."""
    import asyncio

    from owlclaw.mcp.pool import McpPool

    if not servers:
        return {}, {}

    async def connect() -> "tuple[dict[str, Tool], dict[str, str]]":
        pool = McpPool()
        try:
            await pool.ready(servers)
            return dict(pool.tools(servers)), pool.status(servers)
        finally:
            await pool.close()

    return asyncio.run(connect())


def print_stats_table(agent: str, stats: "list[ToolStats]", disabled: list[str]) -> None:
    """The counts in the table, each tool's errors by code under it."""
    table = Table(
        whole("tool"),
        *(whole(c, right=True) for c in ("calls", "ok", "errors", "p50 ms", "p95 ms", "truncated")),
        title=f"tools of {agent}",
    )
    errors = {s.tool: s.errors | ({"timed out": s.timeouts} if s.timeouts else {}) for s in stats}
    for s in stats:
        table.add_row(
            stacked(s.tool, Text("(disabled)", "yellow") if s.tool in disabled else None),
            str(s.calls),
            str(s.succeeded),
            str(sum(errors[s.tool].values())),
            "-" if s.p50_ms is None else f"{s.p50_ms:.1f}",
            "-" if s.p95_ms is None else f"{s.p95_ms:.1f}",
            str(s.truncated),
        )
    out.print(table)
    for tool, codes in errors.items():
        if codes:
            listed = ", ".join(f"{code} {n}" for code, n in codes.items())
            out.print(f"errors of {escape(tool)}: {listed}", highlight=False)
    out.print(f"disabled tools: {', '.join(disabled) or 'none'}", highlight=False)
