"""One litellm per node, shared by the agent actors on it.

litellm holds ~210 MB resident once imported and warmed up, more than the rest of an agent
actor; a dedicated actor per agent would carry it for one agent. Such actors ask their models
through ``NodeLLM`` instead: the ``Completer`` protocol over the node's one ``LLMActor``, which
runs the in-process ``LiteLLM``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import ray

from actors.node import node_actor
from owlclaw.llm import scripted
from owlclaw.runtime.models import Answer, LiteLLM

KIND = "llm"


class ModelCallFailed(RuntimeError):
    """The node's model call failed; the message names the original error (its type is not
    sent: unpickling litellm's exceptions would import litellm in the caller)."""


@ray.remote(max_restarts=-1)
class LLMActor:
    """litellm with OwlClaw's offline providers, imported once for the node."""

    def __init__(self) -> None:
        self.llm = LiteLLM()

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
        script: scripted.Script | None = None,
    ) -> Answer:
        """``script``: what ``scripted/<name>`` plays, as the caller holds it (scripts are
        registered per process, from the caller's configuration and agent apps)."""
        if script is not None:
            scripted.register_script(model.split("/", 1)[1], script)
        try:
            return await self.llm.complete(model, messages, tools, timeout_s)
        except Exception as e:
            raise ModelCallFailed(f"{type(e).__name__}: {e}") from None

    def pid(self) -> int:
        return os.getpid()


class NodeLLM:
    """The ``Completer`` served by this node's ``LLMActor`` (two callers playing different
    scripts under one name at once on one node would race: scripts are test and demo models)."""

    def __init__(self) -> None:
        self._actor: Any = node_actor(LLMActor, KIND)
        """Found or started now: a new node's litellm imports while its first host starts."""

    async def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        timeout_s: float,
    ) -> Answer:
        provider, _, name = model.partition("/")
        script = scripted.script_named(name) if provider == scripted.PROVIDER else None
        call = self._actor.complete.remote(model, messages, tools, timeout_s, script)
        try:
            async with asyncio.timeout(timeout_s):  # keeps a cancel, unlike 3.11's wait_for
                answer: Answer = await call
        except ray.exceptions.RayTaskError as e:
            cause = e.cause
            raise cause if isinstance(cause, ModelCallFailed) else ModelCallFailed(str(e)) from None
        return answer
