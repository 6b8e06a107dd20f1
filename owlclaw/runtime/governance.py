"""Which tools an agent may see and call: allow and deny lists (deny wins), with the reason for
every tool that is filtered out, so "why couldn't the agent do X" is answered by the ledger."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec


class ToolPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    allow: tuple[str, ...] = ()
    """Only these tools are visible; empty means all."""
    deny: tuple[str, ...] = ()
    """Never visible, even when allowed."""

    @classmethod
    def from_app_config(cls, config: dict[str, Any]) -> ToolPolicy:
        """The ``[governance]`` table of the app's owlclaw.toml (ValueError names the field)."""
        try:
            return msgspec.convert(config.get("governance", {}), cls)
        except msgspec.ValidationError as e:
            raise ValueError(f"owlclaw.toml [governance]: {e}") from e

    def resolve(self, tools: Iterable[str]) -> tuple[list[str], dict[str, str]]:
        """Visible tool names, and the reason each other tool is hidden."""
        visible: list[str] = []
        filtered: dict[str, str] = {}
        for name in tools:
            if name in self.deny:
                filtered[name] = "denied by governance.deny"
            elif self.allow and name not in self.allow:
                filtered[name] = "not in governance.allow"
            else:
                visible.append(name)
        return visible, filtered
