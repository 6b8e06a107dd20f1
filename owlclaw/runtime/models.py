"""The model chain: ask each model of the agent's path in turn until one answers, recording
the answer (with the failed hops before it, usage, cost and latency) as LLMResponded.

Models are called through a ``Completer``: litellm in this process (``LiteLLM``), or the node's
shared one (``actors.llm.NodeLLM``: litellm is ~200 MB resident, too much for every agent
actor).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from events import catalog as ev
from events.run import Run
from owlclaw import tracing
from owlclaw.config import RuntimeConfig
from owlclaw.llm.providers import litellm_loading, unlogged
from owlclaw.tools.encoding import json_safe
from owlclaw.tools.live import reraise_cancellation


class EveryModelFailed(Exception):
    """No model of the path answered; the message names each hop's error."""


class Completer(Protocol):
    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        """Ask one model once, within ``timeout_s``; its errors propagate."""
        ...


class LiteLLM:
    """The ``Completer`` of litellm in this process (by default with OwlClaw's offline
    providers registered). Its import takes seconds of CPU: it starts in the background when
    this is made (``litellm_loading``, once per process; not ``import_now``: on the first call,
    unless its owner starts it, as a server does once it serves) and the first call waits for
    it."""

    def __init__(self, litellm: Any = None, *, import_now: bool = True):
        self._litellm = litellm
        if litellm is None and import_now:
            litellm_loading()

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        if self._litellm is None:
            self._litellm = await asyncio.wrap_future(litellm_loading())
        return await complete(self._litellm, model, messages, tools, timeout_s)


async def ask(
    llm: Completer,
    models: list[str],
    limits: RuntimeConfig,
    run: Run,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    inputs: dict[str, Any],
) -> dict[str, Any]:
    """The first answer of ``models`` (tried in order, each within the LLM timeout), recorded
    on ``run``; cancellation is never taken for a model's failure."""
    hops: list[str] = []
    last_error: Exception | None = None
    for model in models:
        began = time.perf_counter()
        with tracing.generation(model, messages) as traced:
            try:
                answer = await llm.complete(model, messages, tools, limits.llm_timeout_s)
            except Exception as e:
                reraise_cancellation(e)
                hops.append(f"{model}: {type(e).__name__}: {e}"[:300])
                last_error = e
                tracing.failed(traced, hops[-1], type(e).__qualname__)
                continue
            tracing.answered(
                traced,
                answer.message,
                answer.usage,
                answer.cost_usd,
                answer.finish_reason,
                answer.response_model,
            )
        run.record(
            ev.LLMResponded,
            model=model,
            message=answer.message,
            fallback_hops=hops,
            usage=answer.usage,
            cost_usd=answer.cost_usd,
            latency_ms=round((time.perf_counter() - began) * 1000, 3),
            inputs=inputs,
        )
        # The conversation's own copy: the recorded one may still be committing while the
        # conversation goes to the next model call (which may normalize it in place).
        copy: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(answer.message))
        return copy
    raise EveryModelFailed(f"every model failed: {last_error}; hops: {hops}")


@dataclass(frozen=True)
class Answer:
    """One model's answer: its message as the ledger stores it, usage and cost."""

    message: dict[str, Any]
    usage: dict[str, int]
    cost_usd: float
    finish_reason: str | None
    response_model: str | None = None
    """The model that answered, as the provider names it."""


async def complete(
    litellm: Any,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    timeout_s: float,
) -> Answer:
    """Ask one model once, within ``timeout_s``; its errors propagate."""
    # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that arrives as the
    # answer does (python/cpython#86296), and a cancelled run went on.
    with unlogged(litellm):
        async with asyncio.timeout(timeout_s):
            response = await litellm.acompletion(
                model=model, messages=messages, tools=tools, timeout=timeout_s
            )
    choice = response.choices[0]
    usage = {
        k: int(getattr(response.usage, k, 0) or 0)
        for k in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    return Answer(
        _recordable(choice.message.model_dump(exclude_none=True)),
        usage,
        _cost(response),
        getattr(choice, "finish_reason", None),
        getattr(response, "model", None),
    )


def _recordable(message: dict[str, Any]) -> dict[str, Any]:
    """The model's message as the ledger can store it: text that is not valid Unicode (a lone
    surrogate a JSON escape produced) gets its bad characters replaced."""
    try:
        msgspec.json.encode(message)
    except UnicodeEncodeError:
        cleaned: dict[str, Any] = msgspec.json.decode(json_safe(message))
        return cleaned
    return message


def _cost(response: Any) -> float:
    """The cost litellm already computed for this response (recomputing it costs ~1 ms)."""
    hidden = getattr(response, "_hidden_params", None) or {}
    return float(hidden.get("response_cost") or 0.0)
