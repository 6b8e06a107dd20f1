"""The agent host as a Ray actor: async, restartable, control calls in their own group.

Every message (``ask``) goes to the host, whose per-agent mailboxes order an agent's runs (Ray
alone does not order the calls of an async actor). ``status`` runs in the ``control``
concurrency group, so it answers even while the host's loop is busy.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import msgspec
import ray

from actors.embedding import NodeEmbedder
from actors.host import AgentHost
from actors.llm import NodeLLM
from events import Ledger
from owlclaw.agents import Agents, HostStatus
from owlclaw.compose.memory import open_recall
from owlclaw.config import OwlClawConfig
from owlclaw.database import open_database
from owlclaw.llm.providers import litellm_loading
from owlclaw.messages import Message
from owlclaw.runtime.models import LiteLLM
from owlclaw.tools.builtin.handlers import BUILTINS


class Placed(Protocol):
    """How the directory that created an actor places agents (``actors.directory``), so that
    the sub-agents the actor's agents spawn are placed (and report back) through the same
    actors; Ray hands it to the actor pickled."""

    node_llm: bool

    def open(self, ledger: Ledger, config: OwlClawConfig) -> Agents:
        """A directory of the same actors, for this actor's agents."""
        ...


GC_THRESHOLDS = (200_000, 50, 50)
"""The collector's thresholds in a host (Python's: 700, 10, 10). A young collection per 200,000
net allocations of containers instead of 700 (a litellm call allocates thousands), the older
generations 50 times rarer than the one below instead of 10: what the runs of 1,000 agents keep
alive is walked that much less often (``owlclaw bench actors``: hosts' CPU per run 9.4-9.8 ->
8.0-8.2 ms, OwlClaw's CPU over litellm's 1.03-1.04 -> 0.74-0.81). Cyclic garbage waits longer
for its collection, a young generation's worth of objects at most."""


@ray.remote(concurrency_groups={"control": 4}, max_restarts=-1)  # type: ignore[call-overload]
class AgentHostActor:
    def __init__(self, config: dict[str, Any], idle_s: float | None, placed: Placed | None = None):
        self.config = msgspec.convert(config, OwlClawConfig)
        database = open_database(self.config)
        self.ledger = Ledger(
            database.url,
            snapshot_interval=self.config.ledger.snapshot_interval,
            archive_dir=self.config.archive_path,
            encrypt=self.config.ledger.encrypt,
        )
        settings = self.config.memory
        memory = open_recall(
            self.ledger,
            self.config,
            NodeEmbedder(settings.embedding_model, settings.embedding_dimensions),
        )
        agents = placed.open(self.ledger, self.config) if placed is not None else None
        node_llm = placed is not None and placed.node_llm
        self._import_litellm = not node_llm
        """litellm in this process: its import (seconds of CPU) starts after the first message,
        which (an agent's activation at the server's start) it would slow down."""
        llm = NodeLLM() if node_llm else LiteLLM(import_now=False)
        self.host = AgentHost(
            self.ledger, self.config, idle_s=idle_s, memory=memory, agents=agents, llm=llm
        )
        # What start-up made (OwlClaw, litellm: ~460k objects) lives as long as the process:
        # out of the collector's sight, a full collection no longer walks it (collections took
        # 2.7-4.4 ms of CPU per run of an in-process host, 0.7-1.4 ms frozen).
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)

    async def ask(self, message: Message[Any]) -> Any:
        """Every message, on the host's loop (handlers never block it, so ``Cancel`` answers
        while a run is in flight)."""
        try:
            return await self.host.ask(message)
        finally:
            if self._import_litellm:
                self._import_litellm = False
                litellm_loading()

    async def model_call_cpu_ms(self, model: str, calls: int) -> float:
        """CPU milliseconds per call of ``calls`` calls to ``model`` made on this host's loop
        the way its runs make them (its ``Completer``, the built-in tools' schemas), without a
        run around them: litellm's share of the host's CPU per run (``owlclaw bench actors``).
        It measures the whole process, so it is asked while the host runs nothing else."""
        tools = [tool.spec.function_schema() for tool in BUILTINS.values()]
        messages = [{"role": "user", "content": "go"}]
        llm = self.host.hosted.llm
        began = time.process_time()
        for _ in range(calls):
            await llm.complete(model, list(messages), tools, 30.0)
        return (time.process_time() - began) * 1000 / calls

    @ray.method(concurrency_group="control")
    def status(self, agent_id: str | None = None) -> HostStatus:
        return self.host.status_now(agent_id)

    @ray.method(concurrency_group="control")
    def pid(self) -> int:
        import os

        return os.getpid()

    @ray.method(concurrency_group="control")
    def rss_bytes(self) -> int:
        """Resident memory of this actor's process (Linux)."""
        status = Path("/proc/self/status").read_text().splitlines()
        kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        return kb * 1024

    @ray.method(concurrency_group="control")
    def imported(self, modules: list[str]) -> list[str]:
        """Which of ``modules`` this actor's process has imported (what its memory holds)."""
        return [m for m in modules if m in sys.modules]

    @ray.method(concurrency_group="control")
    def node(self) -> str:
        node_id: str = ray.get_runtime_context().get_node_id()
        return node_id
