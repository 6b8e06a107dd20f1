"""litellm's own success logging runs only when a litellm callback would read it: OwlClaw records
and traces its calls itself, and that logging contends with the step's commit for the GIL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from owlclaw.llm.providers import litellm_with_offline_providers
from owlclaw.llm.scripted import register_script
from owlclaw.runtime.models import complete


class _Seen:
    """A litellm CustomLogger of a user's, counting the successes it is told of."""

    def __init__(self) -> None:
        from litellm.integrations.custom_logger import CustomLogger

        class Logger(CustomLogger):
            successes = 0

            async def async_log_success_event(self, *args: Any, **kwargs: Any) -> None:
                type(self).successes += 1

        self.logger = Logger()


def _logged_calls(monkeypatch: pytest.MonkeyPatch, callbacks: list[Any]) -> int:
    litellm = litellm_with_offline_providers()
    from litellm.litellm_core_utils.litellm_logging import Logging

    claimed: list[object] = []
    claim = Logging.claim_async_success_log

    def spy(self: Any) -> bool:
        claimed.append(self)
        return claim(self)

    monkeypatch.setattr(Logging, "claim_async_success_log", spy)
    monkeypatch.setattr(litellm, "callbacks", callbacks)
    register_script("logging", [{"content": "hi"}])
    answer = asyncio.run(
        complete(litellm, "scripted/logging", [{"role": "user", "content": "x"}], [], 5)
    )
    assert answer.message["content"] == "hi"
    return len(claimed)


def test_without_a_litellm_callback_the_call_is_not_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _logged_calls(monkeypatch, []) == 0


def test_a_litellm_callback_set_in_the_process_still_gets_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _logged_calls(monkeypatch, [_Seen().logger]) == 1
