"""Which tenant an agent is in: the one whose glob matches its id; two matching is refused."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from owlclaw.config import TenantConfig


class TenantConflict(ValueError):
    """An agent matches the globs of two tenants: which limits apply would be a guess."""


@dataclass(frozen=True)
class Tenant:
    name: str
    config: TenantConfig

    @property
    def budget(self) -> str:
        """The budget's name in BudgetExceeded."""
        return f"tenant:{self.name}.daily_cost_usd"

    def covers(self, agent_id: str) -> bool:
        return fnmatchcase(agent_id, self.config.agents)


class Tenants:
    """The configured tenants (``[tenants.<name>]``)."""

    def __init__(self, configs: Mapping[str, TenantConfig]):
        self.all = [Tenant(name, c) for name, c in sorted(configs.items())]

    def of(self, agent_id: str) -> Tenant | None:
        """The agent's tenant (None: it is in none); TenantConflict when two claim it."""
        found = [t for t in self.all if t.covers(agent_id)]
        if len(found) > 1:
            a, b = found[0], found[1]
            raise TenantConflict(
                f"agent {agent_id!r} is in two tenants: {a.name!r} (agents = {a.config.agents!r})"
                f" and {b.name!r} (agents = {b.config.agents!r}); an agent may be in one only"
            )
        return found[0] if found else None

    def check_served(self, agent_ids: Iterable[str]) -> list[str]:
        """Refuse (TenantConflict) served agents in two tenants; a warning for each tenant
        matching none of them (its agents may be sub-agents spawned later, or a typo)."""
        ids = list(agent_ids)
        for agent_id in ids:
            self.of(agent_id)
        return [
            f"tenant {t.name!r}: agents = {t.config.agents!r} matches no served agent"
            for t in self.all
            if not any(t.covers(a) for a in ids)
        ]
