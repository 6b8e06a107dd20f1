"""An agent's tools by name: the built-ins, the pack tools its app enables and its
capabilities, checked so that configuration cannot silently mean something else.

Two kinds of mistake are refused, each naming what it found: a tool named like another (a
capability called ``remember`` would replace the built-in and lose its ledger behaviour), and a
name or glob in ``[governance]`` that matches no tool of the app (a misspelled ``deny`` entry
would deny nothing).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from fnmatch import fnmatchcase

from owlclaw.app import AppError
from owlclaw.mcp.config import SEPARATOR as MCP_SEPARATOR
from owlclaw.struct_errors import nearest
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.governance import Governance
from owlclaw.tools.pack.config import GROUPS
from owlclaw.tools.tool import Tool

PACK_TOOLS = frozenset(name for names in GROUPS.values() for name in names)


class ToolNameClash(AppError):
    """Two tools of one app have the same name."""


class UnknownToolName(AppError):
    """A governance entry names no tool of the app."""


def tool_kinds(capabilities: Collection[str], pack: Collection[str] = ()) -> dict[str, str]:
    """Every tool name of an agent whose app has ``capabilities`` and enables ``pack`` tools,
    with what it is; ToolNameClash naming both when two share a name."""
    kinds = dict.fromkeys(BUILTINS, "the built-in tool")
    for kind, names in (("the pack tool", pack), ("the capability", capabilities)):
        for name in names:
            if name in kinds:
                raise ToolNameClash(
                    f"{kind} {name!r} is named like {kinds[name]} {name!r}: rename it "
                    "(two tools of one agent cannot share a name)"
                )
            kinds[name] = kind
    return kinds


def agent_tools(
    capabilities: Mapping[str, Tool],
    pack: Mapping[str, Tool] | None = None,
    mcp: Mapping[str, Tool] | None = None,
) -> dict[str, Tool]:
    """Every tool of an agent by name: the built-in tools, its enabled ``pack`` tools, its app's
    ``capabilities`` and the tools of its MCP servers (ToolNameClash when two share a name)."""
    tool_kinds({**capabilities, **(mcp or {})}, pack or {})
    return {**BUILTINS, **(pack or {}), **capabilities, **(mcp or {})}


def check_governance_names(
    governance: Governance,
    tools: Collection[str],
    source: str = "owlclaw.toml",
    mcp_servers: Collection[str] = (),
) -> None:
    """UnknownToolName for the first entry of ``[governance]`` (allow, deny, ask, ask_if,
    rate_limits) that matches none of ``tools``. An entry naming a tool of one of the app's
    ``mcp_servers`` (``<server>__...``) is taken as it is: the server lists its tools only
    once it runs."""
    for key, pattern in governance.tool_patterns():
        if any(fnmatchcase(name, pattern) for name in tools):
            continue
        if any(pattern.startswith(f"{server}{MCP_SEPARATOR}") for server in mcp_servers):
            continue
        why = (
            f"{pattern!r} is a pack tool this app does not enable (add it to [tools] enable)"
            if pattern in PACK_TOOLS
            else f"{pattern!r} matches no tool of this app{nearest(pattern, tools)}"
        )
        raise UnknownToolName(
            f"{source}: [governance] {key}: {why}; its tools: {', '.join(sorted(tools))}"
        )
