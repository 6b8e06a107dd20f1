"""spawn_agent: hand a task to a sub-agent — a real OwlClaw agent with its own streams and
actor — and, with ``wait``, park the run until the sub-agent's run ends (durably, like an
approval: no process holds the parent meanwhile), then return its answer as the tool result.

A profile is ``subagents/<name>/`` in the parent's app (its own SOUL.md, skills, tools);
without one the child runs with the parent's app, minus the tools ``[tools.spawn] withhold``
names. Depth, children per run and the child's cost (charged to the parent's run, so to its
daily budget) are bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec

from events import catalog as ev
from owlclaw.tools.builtin.params import Params
from owlclaw.tools.errors import Parked, ToolError
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

PROFILES_DIR = "subagents"


class SpawnConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[tools.spawn]`` table of an app's owlclaw.toml."""

    max_depth: Annotated[int, msgspec.Meta(ge=1, le=5)] = 2
    """How deep sub-agents may nest (a top-level agent is depth 0)."""
    max_children_per_run: Annotated[int, msgspec.Meta(ge=1, le=50)] = 5
    withhold: tuple[str, ...] = ("send_message",)
    """Tools a sub-agent spawned without a profile does not get."""


class SpawnAgent(Params):
    task: Annotated[
        str, msgspec.Meta(min_length=1, max_length=4000, description="What the sub-agent must do")
    ]
    profile: (
        Annotated[
            str,
            msgspec.Meta(
                pattern=r"^[A-Za-z0-9_-]{1,40}$",
                description="A sub-agent profile of your app (subagents/<name>); omit for "
                "yourself with fewer tools",
            ),
        ]
        | None
    ) = None
    wait: Annotated[
        bool,
        msgspec.Meta(
            description="Wait for its answer (the tool result); false: it arrives later as an "
            "inbound event for your heartbeat"
        ),
    ] = True


def child_agent_id(parent: str, profile: str | None, spawn_id: str) -> str:
    """Stable for one spawning call, and a valid agent id."""
    return f"{parent[:80]}.{profile or 'sub'}-{spawn_id[:8]}"


@dataclass(frozen=True)
class SpawnTool:
    spec: ToolSpec
    config: SpawnConfig
    app_root: Path | None

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        assert isinstance(params, SpawnAgent)
        scope, spawn_id = ctx.scope, ctx.idempotency_key
        spawn = scope.agent.state.spawns.get(spawn_id)
        if spawn is None:
            refused = self._refusal(params, ctx)
            if refused is not None:
                return refused
            spawn = await self._start(params, ctx)
        if not spawn.wait:
            return {
                "agent_id": spawn.child_agent_id,
                "run_id": str(spawn.child_run_id),
                "status": "started",
                "note": "its answer arrives as an inbound event for your heartbeat",
            }
        if not spawn.finished:
            assert scope.subagents is not None
            report = await scope.subagents.ended(spawn.child_run_id)
            if report is None:
                scope.run.record(ev.RunParked, spawn_id=spawn_id, call_id=ctx.call_id)
                raise Parked(spawn_id)
            scope.agent.record(ev.SubAgentFinished, **report.event_fields())
        scope.run.record(
            ev.SubAgentCharged,
            spawn_id=spawn_id,
            child_agent_id=spawn.child_agent_id,
            tokens=spawn.tokens,
            cost_usd=spawn.cost_usd,
        )
        return {
            "agent_id": spawn.child_agent_id,
            "run_id": str(spawn.child_run_id),
            "status": spawn.status,
            "answer": spawn.answer,
        }

    def _refusal(self, params: SpawnAgent, ctx: ToolContext) -> ToolError | None:
        state = ctx.scope.agent.state
        if ctx.scope.subagents is None:
            return _error("sub-agents need a host (owlclaw run)", "SPAWN_UNAVAILABLE")
        if state.depth + 1 > self.config.max_depth:
            return _error(
                f"a sub-agent at depth {state.depth} may not spawn another "
                f"(max_depth {self.config.max_depth})",
                "SPAWN_DEPTH_LIMIT",
            )
        children = sum(1 for s in state.spawns.values() if s.run_id == ctx.run_id)
        if children >= self.config.max_children_per_run:
            return _error(
                f"this run already spawned {children} sub-agents "
                f"(max_children_per_run {self.config.max_children_per_run})",
                "SPAWN_LIMIT",
            )
        if params.profile is not None and self._profile_dir(params.profile) is None:
            return _error(
                f"no sub-agent profile {params.profile!r} (profiles: "
                f"{', '.join(self._profiles()) or 'none'})",
                "UNKNOWN_PROFILE",
            )
        return None

    async def _start(self, params: SpawnAgent, ctx: ToolContext) -> Any:
        scope = ctx.scope
        assert scope.subagents is not None
        state = scope.agent.state
        child = child_agent_id(ctx.agent_id, params.profile, ctx.idempotency_key)
        depth = state.depth + 1
        withheld = [] if params.profile else list(self.config.withhold)
        if depth >= self.config.max_depth:
            withheld.append(self.spec.name)
        profile_dir = self._profile_dir(params.profile) if params.profile else self.app_root
        child_run = await scope.subagents.start(
            child,
            str(profile_dir or ""),
            parent_agent_id=ctx.agent_id,
            depth=depth,
            withheld_tools=sorted(set(withheld)),
            task=params.task,
            spawned_by={
                "parent_agent_id": ctx.agent_id,
                "spawn_id": ctx.idempotency_key,
                "run_id": str(ctx.run_id),
                "call_id": ctx.call_id,
                "wait": params.wait,
            },
            key=ctx.idempotency_key,
        )
        scope.agent.record(
            ev.SubAgentSpawned,
            spawn_id=ctx.idempotency_key,
            run_id=ctx.run_id,
            call_id=ctx.call_id,
            child_agent_id=child,
            child_run_id=child_run,
            profile=params.profile,
            task=params.task,
            wait=params.wait,
        )
        return scope.agent.state.spawns[ctx.idempotency_key]

    def _profiles(self) -> list[str]:
        base = self.app_root / PROFILES_DIR if self.app_root else None
        if base is None or not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if (p / "SOUL.md").is_file())

    def _profile_dir(self, profile: str) -> Path | None:
        if self.app_root is None or profile not in self._profiles():
            return None
        return self.app_root / PROFILES_DIR / profile


def _error(message: str, code: str) -> ToolError:
    return ToolError(error=message, error_code=code)


def spawn_tools(config: SpawnConfig, app_root: Path | None) -> dict[str, Tool]:
    spec = ToolSpec(
        "spawn_agent",
        "Hand a task to a sub-agent (a profile of your app, or yourself with fewer tools); "
        "with wait (the default) you get its answer as the result.",
        SpawnAgent,
        idempotent=True,  # one child run per call (keyed), so a resumed call asks again
        parallel_safe=False,  # its limits count the children the calls before it spawned
        timeout_s=60.0,
        category="agents",
    )
    return {"spawn_agent": SpawnTool(spec, config, app_root)}
