"""An agent's setup as its runtime uses it: the app (reloaded before each run) with its
governance, rate limits, pack tools and models, and what a run reads before it starts (the
agent's head, its recent runs, today's spending against a budget)."""

from __future__ import annotations

import time
from collections import deque
from datetime import date
from pathlib import Path
from typing import NoReturn

from events import Ledger
from events import catalog as ev
from events.agent import Agent
from events.redaction import MIN_SECRET_CHARS
from events.streams import now, run_stream_id
from owlclaw import tracing
from owlclaw.a2a.peers import peer_tools
from owlclaw.app import AgentApp
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.mcp.config import McpServer, mcp_servers
from owlclaw.mcp.pool import McpPool
from owlclaw.runtime.context import RECENT_RUNS, describe_run
from owlclaw.runtime.fencing import AgentWriter
from owlclaw.runtime.progress import RunProgress, Stop
from owlclaw.runtime.prompt import check_core
from owlclaw.runtime.reloader import AppReloader
from owlclaw.runtime.secrets import declared, secret_values, too_short
from owlclaw.runtime.toolset import agent_tools, check_governance_names
from owlclaw.tenants import TenantBudget
from owlclaw.tools.builtin.send_to_agent import agent_message_tools
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance, spent_today
from owlclaw.tools.pack.config import ToolsConfig, pack_tools
from owlclaw.tools.rate_limits import RateLimiter
from owlclaw.tools.tool import Tool


class AgentSetup:
    """One agent's app state and run preparation. ``observes_world`` False (an audit replay):
    the agent is read as stored, and the app directory, budgets and memory are not read."""

    def __init__(
        self,
        ledger: Ledger,
        agent_id: str,
        *,
        models: list[str],
        app: AgentApp | None,
        app_dir: Path | None,
        registry: Registry | None,
        limits: RuntimeConfig,
        governance: Governance | None,
        workspaces: Path | None,
        observes_world: bool,
        mcp: McpPool | None = None,
        tenant_budget: TenantBudget | None = None,
    ):
        """``mcp``: the host's MCP connections (None: the app's MCP servers are not used);
        ``tenant_budget``: the daily cost budget of the agent's tenant."""
        self.ledger = ledger
        self.agent_id = agent_id
        self.models = models
        self.registry = registry or Registry()
        self.limits = limits
        self.observes_world = observes_world
        self.writer = AgentWriter(ledger)
        self._app = AppReloader(
            app,
            app_dir,
            load_timeout_s=limits.app_load_timeout_s,
            imports_code=registry is None,
            switched=self._switch,
        )
        self.governance = governance or (
            Governance.from_app_config(app.config) if app is not None else Governance()
        )
        self.rate = RateLimiter(self.governance.rate_limits_with(app.skills if app else {}))
        self.workspaces = workspaces or OwlClawConfig().workspaces_path
        """Where the agent's workspace is (``<workspaces>/<agent id>``), for the pack tools."""
        self.pack = (
            {
                **pack_tools(ToolsConfig.from_app_config(app.config), self.workspaces, app.root),
                **peer_tools(app.config),
                **agent_message_tools(self.governance),
            }
            if app
            else {}
        )
        """The pack tools its app enables (``[tools] enable``), its A2A peers' tools and
        send_to_agent when its governance names agents it may message."""
        self.mcp = mcp
        self.mcp_servers: dict[str, McpServer] = mcp_servers(app.config) if app else {}
        """The MCP servers its app takes tools from (``[mcp.servers.<name>]``)."""
        self.parent_agent_id = ""
        """The agent that spawned this one ("" for a top-level agent), as last loaded."""
        self.recent: deque[list[tuple[str, int]]] | None = None
        """What its last runs did, for the prompt (read once, then kept up to date)."""
        self._spent: tuple[date, int, float] | None = None
        """(UTC day, tokens, cost) of this agent's finished runs that day."""
        self._short_secrets: list[str] = []
        """The secrets last warned about as too short to redact."""
        self.tenant_budget = tenant_budget if observes_world else None
        if observes_world:  # before the agent records anything (a trigger's RunQueued)
            self._redact()

    @property
    def app(self) -> AgentApp | None:
        return self._app.app

    @property
    def app_dir(self) -> Path | None:
        """Where the app is (re)loaded from before each run; None: an agent without an app."""
        return self._app.app_dir

    @property
    def app_error(self) -> str | None:
        """Why the app directory does not load (and no earlier version did): runs fail with it."""
        return self._app.error

    def tools(self) -> dict[str, Tool]:
        """Every tool of this agent, built-in, the app's and its MCP servers' (as last
        listed), by name."""
        return agent_tools(self.registry.capabilities, self.pack, self._mcp_tools())

    def _mcp_tools(self) -> dict[str, Tool]:
        return dict(self.mcp.tools(self.mcp_servers)) if self.mcp is not None else {}

    async def connect_mcp(self) -> None:
        """Have the app's MCP servers started (on first use) and listed, each waited for at
        most its ``connect_timeout_s``; a server that cannot start leaves its tools out, the others'
        are there."""
        if self.mcp is not None and self.mcp_servers:
            await self.mcp.ready(self.mcp_servers)

    def reload(self, agent: Agent) -> bool:
        """Re-read the app directory and use what changed; True when ``agent`` recorded a new
        IdentityLoaded (see ``AppReloader.reload``)."""
        return self._app.reload(agent)

    def _switch(
        self, app: AgentApp, governance: Governance, tools: ToolsConfig, registry: Registry | None
    ) -> None:
        """The app reloader switched to ``app``: use its governance, rate limits, pack tools and
        models; an AppError, and nothing switched, when its tools clash, its governance names
        a tool it does not have or its core does not fit the system prompt's budget."""
        check_core(app, self.limits, self.models)
        source = str(app.root / "owlclaw.toml")
        pack = {
            **pack_tools(tools, self.workspaces, app.root),
            **peer_tools(app.config, source),
            **agent_message_tools(governance),
        }
        capabilities = (registry or self.registry).capabilities
        servers = mcp_servers(app.config, source)
        declared(app.config, source)
        check_governance_names(
            governance, agent_tools(capabilities, pack, self._mcp_tools()), source, servers
        )
        if registry is not None:
            self.registry = registry
        self.governance = governance
        self.pack = pack
        self.mcp_servers = servers
        self.rate = self.rate.with_limits(governance.rate_limits_with(app.skills))
        if app.settings.models:
            self.models = list(app.settings.models)

    def head(self) -> Agent:
        """The agent as of now (registered on first use): what a message that records a fact
        needs."""
        if not self.observes_world:
            return self.ledger.load_agent(self.agent_id)
        agent = self.writer.current(self.agent_id)
        if agent is None:
            agent = self.ledger.register_agent(self.agent_id, str(self.app_dir or ""))
            self.writer.seen(agent)
        self.parent_agent_id = agent.state.parent_agent_id
        return agent

    def prepare(self) -> Agent:
        """The agent as a run starts: its head, its app reloaded (what changed recorded on
        it), its secrets' values redacted from what the ledger stores and traces, its rate
        limits loaded, its recent runs and, when a budget is set, today's spending known."""
        agent = self.head()
        if not self.observes_world:
            return agent
        self.reload(agent)
        self._warn_short(agent, self._redact())
        self.rate.load(self.ledger, agent, time.time())
        if self.recent is None:
            last = agent.state.run_count
            self.recent = deque(
                (
                    describe_run(self.ledger.stream(run_stream_id(self.agent_id, n)))
                    for n in range(max(1, last - RECENT_RUNS + 1), last + 1)
                ),
                maxlen=RECENT_RUNS,
            )
        if self._budgeted() and (self._spent is None or self._spent[0] != now().date()):
            today = now().date()
            self._spent = (today, *spent_today(self.ledger, agent, today))
        return agent

    def _redact(self) -> dict[str, str]:
        """Have the ledger and the traces redact its secrets (as set now); them, by name."""
        secrets = secret_values(self.app)
        self.ledger.redact(secrets)
        tracing.redact(secrets)
        return secrets

    def _warn_short(self, agent: Agent, secrets: dict[str, str]) -> None:
        """A secret too short to redact is an AgentWarning, once for each such set of names
        (never its value)."""
        short = too_short(secrets)
        if short and short != self._short_secrets:
            agent.record(
                ev.AgentWarning,
                source="secrets",
                message=f"not redacted, shorter than {MIN_SECRET_CHARS} characters: "
                + ", ".join(short),
            )
        self._short_secrets = short

    def _budgeted(self) -> bool:
        g = self.governance
        return self.observes_world and (g.daily_tokens is not None or g.daily_cost_usd is not None)

    def ran(self, state: RunProgress) -> None:
        """Count a finished run in the recent runs and today's spending."""
        if self.recent is not None:
            self.recent.append(describe_run(state.events))
        if self._spent is not None and self._spent[0] == now().date():
            day, tokens, cost = self._spent
            self._spent = (day, tokens + state.run.state.tokens, cost + state.run.state.cost_usd)

    def check_budget(self, state: RunProgress) -> None:
        """Stop the run (RunTerminated + BudgetExceeded on the agent) once today's budget, the
        agent's or its tenant's, is spent; checked before every model call, so a run never
        starts a call beyond it."""
        run = state.run
        if self._budgeted() and self._spent is not None:
            _, tokens, cost = self._spent
            g = self.governance
            for budget, limit, spent in (
                ("daily_tokens", g.daily_tokens, tokens + run.state.tokens),
                ("daily_cost_usd", g.daily_cost_usd, cost + run.state.cost_usd),
            ):
                if limit is not None and spent >= limit:
                    _exceeded(state, budget, limit, spent)
        tenant = self.tenant_budget
        if tenant is not None and tenant.limit is not None:
            beyond = tenant.spent_beyond(run.id, run.state.cost_usd)
            if beyond is not None:
                _exceeded(state, tenant.tenant.budget, tenant.limit, beyond)


def _exceeded(state: RunProgress, budget: str, limit: float, spent: float) -> NoReturn:
    """Record BudgetExceeded on the agent and stop the run."""
    state.agent.record(
        ev.BudgetExceeded,
        run_id=state.run.id,
        budget=budget,
        limit=float(limit),
        spent=float(spent),
    )
    raise Stop(
        ev.RunTerminated,
        reason=f"{budget} budget exceeded: spent {spent:g} of {limit:g} today (UTC)",
    )
