"""Helpers of the tenant tests: a model whose every answer costs, and configs with tenants."""

from __future__ import annotations

import dataclasses
from typing import Any

from owlclaw.config import OwlClawConfig, RuntimeConfig, TenantConfig
from owlclaw.runtime.models import Answer, LiteLLM


class Priced:
    """The offline models, each answer priced at ``cost_usd`` (the scripted model is free)."""

    def __init__(self, cost_usd: float):
        self.cost_usd = cost_usd
        self._llm = LiteLLM()

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        answer = await self._llm.complete(model, messages, tools, timeout_s)
        return dataclasses.replace(answer, cost_usd=self.cost_usd)


def with_tenants(model: str, **tenants: TenantConfig) -> OwlClawConfig:
    return OwlClawConfig(runtime=RuntimeConfig(models=(model,)), tenants=tenants)
