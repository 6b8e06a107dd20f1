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
"""How long a provider may take when it sets no ``timeout_s`` (the specification's default)."""
MAX_STATE_TIMEOUT_SECONDS = 300.0
"""The longest a provider may set: ``query_state``'s own tool limit lies beyond it, so a slow
provider is always a STATE_TIMEOUT, never the generic TIMEOUT of the call."""

Handler = Callable[..., Any]
Clock = Callable[[], float]


class UnknownState(KeyError):
    def __init__(self, name: str, available: list[str]):
        super().__init__(name)
        self.message = (
            f"unknown state {name!r}; available states: {', '.join(sorted(available)) or 'none'}"
        )

    def __str__(self) -> str:
        return self.message


class StateTimedOut(Exception):
    """The provider did not answer within its time limit."""

    def __init__(self, name: str, timeout_s: float):
        super().__init__(f"state provider {name!r} did not answer within {timeout_s:g} s")
        self.timeout_s = timeout_s


@dataclass
class StateProvider:
    handler: Handler
    ttl_seconds: float = 0.0
    timeout_s: float = STATE_TIMEOUT_SECONDS
    _cached: tuple[float, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.ttl_seconds < 0:
            raise ValueError(f"a state's ttl_seconds cannot be negative, got {self.ttl_seconds}")
        if not 0 < self.timeout_s <= MAX_STATE_TIMEOUT_SECONDS:
            raise ValueError(
                f"a state's timeout_s must be above 0 and at most {MAX_STATE_TIMEOUT_SECONDS:g}"
                f" s, got {self.timeout_s}"
            )


class States(dict[str, StateProvider]):
    """The providers by name; ``clock`` (monotonic seconds) ages their cached values."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        super().__init__()
        self.clock = clock

    async def read_state(
        self, name: str, threads: HandlerThreads, limit_s: float | None = None
    ) -> Any:
        """The provider's value, served from its cache within its TTL; a synchronous provider
        runs in one of ``threads``. Bounded by the provider's ``timeout_s`` and by ``limit_s``
        (the runtime's tool limit) when shorter: StateTimedOut past it."""
        provider = self.get(name)
        if provider is None:
            raise UnknownState(name, list(self))
        now = self.clock()
        if provider._cached and now - provider._cached[0] < provider.ttl_seconds:
            return provider._cached[1]
        timeout_s = min(provider.timeout_s, limit_s or provider.timeout_s)
        handler = provider.handler
        read = handler() if inspect.iscoroutinefunction(handler) else threads.call(handler)
        limit = asyncio.timeout(timeout_s)  # keeps a cancel, unlike 3.11's wait_for
        try:
            async with limit:
                value = await read
        except TimeoutError:
            if limit.expired():
                raise StateTimedOut(name, timeout_s) from None
            raise
        if provider.ttl_seconds:
            provider._cached = (now, value)
        return value
