"""The app reloader: re-reads an agent's app directory before each run and switches to what
changed, recording the identity it now runs with (IdentityLoaded) or why it cannot (AppLoadFailed,
or an AgentWarning when an earlier version keeps serving)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from events import catalog as ev
from events.agent import Agent
from events.agent_state import PREVIOUS_APP_KEPT
from owlclaw.app import SCRIPTS_DIR, AgentApp, AppError, load_app
from owlclaw.llm.scripted import ScriptError, load_script_dir
from owlclaw.runtime.app_code import AppCode, AppCodeError
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance
from owlclaw.tools.pack.config import ToolsConfig

Switched = Callable[[AgentApp, Governance, ToolsConfig, Registry | None], None]
"""Told of each switch: the new app, its governance, its pack tools and, when its code was
imported, its capabilities (None: the code did not change or the registry is not the app's)."""


class AppReloader:
    """One agent's app as last loaded from ``app_dir`` (None: an agent without an app)."""

    def __init__(
        self,
        app: AgentApp | None,
        app_dir: Path | None,
        *,
        load_timeout_s: float,
        imports_code: bool,
        switched: Switched,
    ):
        self.app = app
        self.app_dir = app.root if app is not None else app_dir
        self.error: str | None = None
        """Why the app directory does not load (and no earlier version did): runs fail with it."""
        self._code = AppCode(load_timeout_s)
        self._imports_code = imports_code
        """Without an injected registry, the app's handlers.py provides the capabilities."""
        self._switched = switched

    def reload(self, agent: Agent) -> bool:
        """Re-read the app directory and use what changed (identity, governance, models, code,
        scripts); record IdentityLoaded (with warnings for skipped skills) on ``agent`` when it
        differs from the identity the ledger last recorded.

        A directory that no longer loads keeps the previous version, with an AgentWarning; with
        no version loaded, the agent records AppLoadFailed and its runs fail with that error.
        """
        if self.app_dir is None:
            return False
        try:
            fresh = load_app(self.app_dir)
            governance = Governance.from_app_config(fresh.config)
            tools = ToolsConfig.from_app_config(fresh.config)
            if self.app is None or fresh.fingerprint != self.app.fingerprint:
                self._use(fresh, governance, tools)
        except (AppError, ValueError, ScriptError) as e:
            if self.app is None:
                self.error = f"the app directory does not load: {e}"
                details = e.details if isinstance(e, AppCodeError) else ""
                agent.app_failed(str(self.app_dir), str(e), details)
                return False
            agent.record(
                ev.AgentWarning,
                source=PREVIOUS_APP_KEPT,
                message=f"kept the previous identity: {e}",
            )
            return False
        self.error = None
        state = agent.state
        recorded = (
            state.soul_sha256,
            state.identity_sha256,
            state.skills,
            state.config_sha256,
            state.code_sha256,
        )
        if (
            state.identity_versions
            and fresh.fingerprint == recorded
            and not state.app_error
            and not state.app_warning  # the app loads again: say so, which ends the warning
        ):
            return False
        agent.record(
            ev.IdentityLoaded,
            soul_sha256=fresh.soul_sha256,
            identity_sha256=fresh.identity_sha256,
            skills=fresh.skill_hashes,
            config_sha256=fresh.config_sha256,
            code_sha256=fresh.code_sha256,
            governance=msgspec.to_builtins(governance),
        )
        for warning in fresh.warnings:
            agent.record(ev.AgentWarning, source="skills", message=warning)
        return True

    def _use(self, app: AgentApp, governance: Governance, tools: ToolsConfig) -> None:
        """Switch to ``app``; its code is imported (and its scripts registered) only when they
        changed, and nothing switches if that fails or the runtime refuses the switch."""
        code_changed = self.app is None or app.code_sha256 != self.app.code_sha256
        registry = None
        if code_changed and self._imports_code:
            registry = self._code.load(app.handlers) if app.handlers else Registry()
        if (app.root / SCRIPTS_DIR).is_dir():
            load_script_dir(app.root / SCRIPTS_DIR)
        self._switched(app, governance, tools, registry)
        self.app = app
