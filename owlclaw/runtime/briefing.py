"""What the model is shown at the start of a run: the system prompt, and the tools it may call
(the agent's tools less what governance, the operator or the spawning agent hide)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from events import catalog as ev
from events.agent import Agent
from events.agent_state import ActiveSchedule
from events.streams import now
from owlclaw.runtime.agent_setup import AgentSetup
from owlclaw.runtime.prompt import Prompt, system_prompt
from owlclaw.tools.tool import Tool
from projections.recall import MemoryStore


class Briefing:
    """The prompt and visible tools of one agent's runs."""

    def __init__(self, setup: AgentSetup, memory: MemoryStore | None):
        self.setup = setup
        self.memory = memory

    def visible(
        self, agent: Agent, tools: dict[str, Tool], recorded: Iterable[str] = ()
    ) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The function schemas the model sees, and why each other tool is hidden.
        ``recorded``: tools a recording saw that this process does not load (a replay's)."""
        setup = self.setup
        skills = setup.app.skills if setup.app is not None else {}
        withheld = set(agent.state.withheld_tools)
        names = [n for n in [*tools, *recorded] if n not in withheld]
        visible, filtered = setup.governance.resolve(
            names, skills, now(), disabled=agent.disabled_tools
        )
        filtered |= {n: "not given to this sub-agent" for n in tools if n in withheld}
        schemas = [tools[n].spec.function_schema() for n in visible if n in tools]
        return schemas + [recorded_schema(n) for n in visible if n not in tools], filtered

    async def system_prompt(
        self,
        focus: str | None,
        trigger: str,
        schedules: Mapping[str, ActiveSchedule] | None = None,
        inbound: Sequence[ev.LedgerEvent] = (),
        active_memories: Sequence[UUID] | None = None,
    ) -> Prompt:
        """Identity, what arrived since the last run, active schedules, recalled memories,
        recent activity and skills; plus the recorded inputs (``active_memories``: see
        ``prompt.system_prompt``)."""
        setup = self.setup
        recalls = self.memory is not None and setup.observes_world
        return await system_prompt(
            setup.app,
            setup.limits,
            setup.recent or (),
            focus,
            trigger,
            memory=self.memory if recalls else None,
            agent_id=setup.agent_id,
            schedules=schedules,
            inbound=inbound,
            active_memories=active_memories,
            model=setup.models[0] if setup.models else None,
        )


def recorded_schema(name: str) -> dict[str, Any]:
    """Replay only: a capability known from the recording, not loaded in this process."""
    return {
        "type": "function",
        "function": {"name": name, "description": "(recorded)", "parameters": {"type": "object"}},
    }
