"""A host's tenant limits: the agent's tenant budget for its runtime, and the slot a run holds
while it runs; on the ledger's database, or in this process for the in-memory ledger."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import psycopg

from events import Ledger, NoDatabase
from events.postgres import connect_kwargs
from owlclaw.config import TenantConfig
from owlclaw.tenants.match import Tenants
from owlclaw.tenants.slots import LocalSlots, PostgresSlots, Slots
from owlclaw.tenants.spending import TenantBudget, TenantSpending, ledger_source, view_source
from projections import RunsView


class TenantLimits:
    def __init__(self, tenants: Tenants, spending: TenantSpending, slots: Slots):
        self.tenants = tenants
        self.spending = spending
        self.slots = slots

    @classmethod
    def on(cls, ledger: Ledger, configs: Mapping[str, TenantConfig]) -> TenantLimits:
        """The limits of ``configs`` kept where ``ledger`` keeps its data."""
        try:
            datastore = ledger.database.datastore
        except NoDatabase:
            return cls(Tenants(configs), TenantSpending(ledger_source(ledger)), LocalSlots())

        def connect() -> psycopg.Connection[Any]:
            kwargs = {**connect_kwargs(datastore), "autocommit": True}
            return psycopg.connect(**kwargs, application_name="owlclaw tenant slots")

        spending = TenantSpending(view_source(RunsView(ledger)))
        return cls(Tenants(configs), spending, PostgresSlots(connect))

    def budget_of(self, agent_id: str) -> TenantBudget | None:
        """The agent's tenant's daily cost budget, if it has one (TenantConflict: two)."""
        tenant = self.tenants.of(agent_id)
        if tenant is None or tenant.config.daily_cost_usd is None:
            return None
        return TenantBudget(tenant, self.spending)

    def slot(self, agent_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A slot among the agent's tenant's concurrent runs, waited for while none is free."""
        tenant = self.tenants.of(agent_id)
        return self.slots.hold(tenant) if tenant is not None else contextlib.nullcontext()

    def close(self) -> None:
        if isinstance(self.slots, PostgresSlots):
            self.slots.close()
