"""The ``[tools]`` table of an app's owlclaw.toml: which pack tools the agent has, and their
settings. None is enabled by default; an enabled tool is governed like any other (allow, deny,
ask, rate limits), bounded and recorded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from owlclaw.struct_errors import describe
from owlclaw.tools.pack.files import FilesConfig, file_tools
from owlclaw.tools.pack.messages import ChannelConfig, message_tools
from owlclaw.tools.pack.shell import ExecConfig, exec_tools
from owlclaw.tools.pack.spawn import SpawnConfig, spawn_tools
from owlclaw.tools.pack.web import web_tools
from owlclaw.tools.pack.web_config import WebConfig
from owlclaw.tools.tool import Tool

GROUPS: dict[str, tuple[str, ...]] = {
    "files": ("read_file", "write_file", "edit_file", "list_dir"),
    "exec": ("exec",),
    "web": ("web_fetch", "web_search"),
    "send_message": ("send_message",),
    "spawn_agent": ("spawn_agent",),
}
"""What each name ``enable`` accepts stands for."""


class ToolsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    enable: tuple[str, ...] = ()
    """Pack tools this agent has: a group (``files``, ``web``) or tool names (``read_file``,
    ``web_fetch``, ``exec``)."""
    files: FilesConfig = FilesConfig()
    exec: ExecConfig = ExecConfig()
    web: WebConfig = WebConfig()
    channels: dict[str, ChannelConfig] = {}
    """send_message's channels by name (``[tools.channels.<name>]``)."""
    spawn: SpawnConfig = SpawnConfig()

    @classmethod
    def from_app_config(
        cls, config: Mapping[str, Any], source: str = "owlclaw.toml"
    ) -> ToolsConfig:
        """Validate the table; ValueError names ``source`` and the offending field or name."""
        table = config.get("tools", {})
        try:
            tools = msgspec.convert(table, cls)
        except msgspec.ValidationError as e:
            raise ValueError(f"{source}: {describe(e, cls, table, 'tools')}") from e
        known = {*GROUPS, *(n for names in GROUPS.values() for n in names)}
        unknown = sorted(set(tools.enable) - known)
        if unknown:
            raise ValueError(
                f"{source}: [tools] enable names unknown tools {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        return tools

    def enabled(self) -> set[str]:
        return {name for entry in self.enable for name in GROUPS.get(entry, (entry,))}


def pack_tools(
    config: ToolsConfig, workspaces: Path, app_root: Path | None = None
) -> dict[str, Tool]:
    """The enabled pack tools of an agent whose workspace is ``workspaces/<agent id>`` and
    whose app (with its sub-agent profiles) is at ``app_root``."""
    available = {
        **file_tools(workspaces, config.files),
        **exec_tools(workspaces, config.exec),
        **web_tools(config.web),
        **message_tools(config.channels),
        **spawn_tools(config.spawn, app_root),
    }
    enabled = config.enabled()
    return {name: tool for name, tool in available.items() if name in enabled}
