"""Tenants: sets of agents (an agent-id glob) that share a daily cost budget and a cap on
concurrent runs, held across every process serving them (docs/governance.md, Tenants)."""

from owlclaw.tenants.limits import TenantLimits
from owlclaw.tenants.match import Tenant, TenantConflict, Tenants
from owlclaw.tenants.spending import DaySpending, TenantBudget

__all__ = ["DaySpending", "Tenant", "TenantBudget", "TenantConflict", "TenantLimits", "Tenants"]
