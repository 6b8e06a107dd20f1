"""A run cancelled just as its model call or state read finishes is cancelled, not continued.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when the cancel and the result
arrive in the same loop iteration, swallowing the cancel (python/cpython#86296): a cancel at
the very start of a run answered True while the run went on to complete."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from owlclaw.runtime.models import complete
from owlclaw.tools.capabilities import Registry


async def cancelled_as_it_finishes(answered: asyncio.Future[Any], work: asyncio.Task[Any]) -> None:
    for _ in range(3):  # let the work reach its await on ``answered``
        await asyncio.sleep(0)
    answered.set_result(answered.get_loop().time())
    work.cancel()
    with pytest.raises(asyncio.CancelledError):
        await work


def test_a_model_call_answered_as_it_is_cancelled_is_cancelled() -> None:
    async def scenario() -> None:
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def acompletion(**_: Any) -> Any:
            await answered
            message = SimpleNamespace(model_dump=lambda **_: {"content": "late"})
            return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=None)

        model = SimpleNamespace(acompletion=acompletion)
        call = asyncio.create_task(complete(model, "scripted/x", [], [], timeout_s=30))
        await cancelled_as_it_finishes(answered, call)

    asyncio.run(scenario())


def test_a_state_read_answered_as_it_is_cancelled_is_cancelled() -> None:
    async def scenario() -> None:
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        registry = Registry()

        @registry.state("price")
        async def price() -> Any:
            return await answered

        read = asyncio.create_task(registry.states.read_state("price", threads=None))  # type: ignore[arg-type]
        await cancelled_as_it_finishes(answered, read)

    asyncio.run(scenario())
