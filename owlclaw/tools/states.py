"""An app's state providers (``@registry.state``), read by the built-in ``query_state`` tool.

Apart from the capabilities so that a tool's context can name them without importing the
registry, which itself imports the tool contract.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from owlclaw.tools.threads import HandlerThreads

STATE_TIMEOUT_SECONDS = 30.0

Handler = Callable[..., Any]


class UnknownState(KeyError):
    def __init__(self, name: str, available: list[str]):
        super().__init__(name)
        self.message = (
            f"unknown state {name!r}; available states: {', '.join(sorted(available)) or 'none'}"
        )

    def __str__(self) -> str:
        return self.message


@dataclass
class StateProvider:
    handler: Handler
    ttl_seconds: float = 0.0
    _cached: tuple[float, Any] | None = field(default=None, repr=False)


class States(dict[str, StateProvider]):
    """The providers by name."""

    async def read_state(
        self, name: str, threads: HandlerThreads, timeout: float = STATE_TIMEOUT_SECONDS
    ) -> Any:
        """The provider's value; a synchronous provider runs in one of ``threads``."""
        provider = self.get(name)
        if provider is None:
            raise UnknownState(name, list(self))
        now = time.monotonic()
        if provider._cached and now - provider._cached[0] < provider.ttl_seconds:
            return provider._cached[1]
        handler = provider.handler
        read = handler() if inspect.iscoroutinefunction(handler) else threads.call(handler)
        async with asyncio.timeout(timeout):  # keeps a cancel, unlike 3.11's wait_for
            value = await read
        if provider.ttl_seconds:
            provider._cached = (now, value)
        return value
