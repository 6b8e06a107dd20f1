"""The model chain: each model of the path is tried in order; the answer is recorded once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from events import catalog as ev
from events.agent import Agent
from events.run import Run
from events.streams import agent_stream_id
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.models import EveryModelFailed, LiteLLM, ask


class _Message:
    def model_dump(self, exclude_none: bool) -> dict[str, Any]:
        return {"role": "assistant", "content": "done"}


class _Provider:
    """Fails for every model named in ``failing``; answers with usage and cost otherwise."""

    def __init__(self, failing: set[str]):
        self.failing = failing
        self.asked: list[str] = []

    async def acompletion(self, *, model: str, **_: Any) -> Any:
        self.asked.append(model)
        if model in self.failing:
            raise ConnectionError(f"{model} is down")
        response = SimpleNamespace(
            choices=[SimpleNamespace(message=_Message())],
            usage=SimpleNamespace(prompt_tokens=3, completion_tokens=2, total_tokens=5),
        )
        response._hidden_params = {"response_cost": 0.25}
        return response


def _run() -> Run:
    agent = Agent.blank(agent_stream_id("chain"))
    agent.record(ev.AgentRegistered, agent_id="chain")
    return Run.start("chain", agent.queue_run("manual", None))


def test_a_failing_model_falls_back_to_the_next_and_the_hop_is_recorded() -> None:
    provider, run = _Provider({"first"}), _run()
    message = asyncio.run(
        ask(LiteLLM(provider), ["first", "second"], RuntimeConfig(), run, [], [], {"why": 1})
    )
    assert message == {"role": "assistant", "content": "done"}
    assert provider.asked == ["first", "second"]
    [responded] = [e for e in run.pending_events if isinstance(e, ev.LLMResponded)]
    assert responded.model == "second"
    assert responded.fallback_hops == ["first: ConnectionError: first is down"]
    assert (responded.usage["total_tokens"], responded.cost_usd) == (5, 0.25)
    assert responded.inputs == {"why": 1}
    assert (run.state.llm_calls, run.state.tokens, run.state.cost_usd) == (1, 5, 0.25)


def test_when_every_model_fails_nothing_is_recorded_and_the_error_names_each_hop() -> None:
    provider, run = _Provider({"first", "second"}), _run()
    with pytest.raises(EveryModelFailed, match=r"second is down; hops: .*first: Conn"):
        asyncio.run(ask(LiteLLM(provider), ["first", "second"], RuntimeConfig(), run, [], [], {}))
    assert not any(isinstance(e, ev.LLMResponded) for e in run.pending_events)
