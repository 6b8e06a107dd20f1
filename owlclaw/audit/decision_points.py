"""The decision points of a recorded run as the model saw them, rebuilt from the ledger.

The ledger records each model response (LLMResponded) but not the request, so the conversation
at step k is rebuilt the way the decision loop built it: the system prompt from the agent's app
(the hashes recorded with the first response say whether it is still the same), what arrived
(the run's inbound events), the schedules active when the run started, the memories it recalled
(their ids recorded with the first response, their text from MemoryRemembered), the recent
activity of the runs before it (the loop's rule: the ``RECENT_RUNS`` runs before it); the user
message from RunStarted; then each recorded response followed by what the model was told of each
of its calls (the recorded outcome, cut to the tool's limit). Where the rebuilt prompt's inputs
differ from the recorded ones, ``RunContext.drift`` says so.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import threading
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec

from events import Ledger, UnknownRun
from events import catalog as ev
from events.agent import Agent
from events.agent_state import ActiveSchedule
from events.streams import agent_stream_id, run_stream_id
from owlclaw.a2a.peers import peer_tools
from owlclaw.app import SCRIPTS_DIR, AgentApp, load_app
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.llm.scripted import load_script_dir
from owlclaw.runtime.app_code import AppCode
from owlclaw.runtime.briefing import recorded_schema
from owlclaw.runtime.context import RECENT_RUNS, describe_run
from owlclaw.runtime.prompt import system_prompt
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.runtime.toolset import agent_tools
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.encoding import canonical_arguments, encode_told, truncate
from owlclaw.tools.pack.config import ToolsConfig, pack_tools
from owlclaw.tools.tool import Tool
from projections.recall import RecallResult
from projections.relevance import Memory

COMPARED_INPUTS = ("soul_sha256", "identity_sha256", "inbound", "schedules", "skills")
"""Recorded prompt inputs the rebuilt prompt is checked against."""
DESCRIBED_KEPT = 256
"""Recent-activity descriptions of runs kept while rebuilding many runs in order."""


@dataclass(frozen=True)
class DecisionPoint:
    """One model call of a recorded run: the conversation it was asked with, its answer."""

    step: int
    """1-based: the step-th LLMResponded of the run."""
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    """The function schemas the model was offered."""
    response: ev.LLMResponded


@dataclass
class RunContext:
    """A recorded run's context: its opening messages, visible tools and recorded outcomes."""

    agent_id: str
    run_no: int
    recorded: RecordedRun
    opening: list[dict[str, Any]]
    """The system prompt and the user message."""
    tools: list[dict[str, Any]]
    """The function schemas the model saw."""
    limits: dict[str, int]
    """Tool name -> how many bytes of its result the model was shown."""
    default_limit: int
    drift: list[str] = field(default_factory=list)
    """Where the rebuilt prompt's inputs differ from the recorded ones."""

    @property
    def responses(self) -> list[ev.LLMResponded]:
        return [e for e in self.recorded.events if isinstance(e, ev.LLMResponded)]

    def points(self) -> list[DecisionPoint]:
        """Every decision point, with the conversation as the model had it then."""
        messages = list(self.opening)
        points = []
        for step, response in enumerate(self.responses, 1):
            points.append(DecisionPoint(step, list(messages), self.tools, response))
            messages += [response.message, *self.told_all(response.message)]
        return points

    def told_all(self, message: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The tool messages answering a recorded message's calls."""
        return [
            tool_message(call, self.told(str(call.get("id") or ""), call_name(call)))
            for call in message.get("tool_calls") or []
        ]

    def told(self, call_id: str, tool: str) -> str:
        """What the model was told of a recorded call: its result cut to the tool's limit, or
        its structured error."""
        event = self.recorded.outcome_event(call_id)
        if isinstance(event, ev.ToolCallSucceeded):
            limit = self.limits.get(tool, self.default_limit)
            return truncate(msgspec.json.encode(event.result), limit)[0]
        return encode_told(self.recorded.outcome(call_id))

    def recorded_calls(self) -> dict[tuple[str, str], str]:
        """(tool, canonical arguments) -> the id of a recorded call made with them whose
        outcome was recorded."""
        calls: dict[tuple[str, str], str] = {}
        for response in self.responses:
            for call in response.message.get("tool_calls") or []:
                call_id = str(call.get("id") or "")
                if self.recorded.outcome_event(call_id) is not None:
                    key = (call_name(call), canonical_arguments(call_arguments(call)))
                    calls.setdefault(key, call_id)
        return calls


def call_name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def call_arguments(call: Mapping[str, Any]) -> str:
    """A call's argument text, whatever shape the model gave it."""
    arguments = (call.get("function") or {}).get("arguments")
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments, ensure_ascii=False)


def tool_message(call: Mapping[str, Any], told: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.get("id"), "content": told}


async def decision_points(
    ledger: Ledger,
    agent_id: str,
    run_no: int,
    *,
    app: AgentApp | None = None,
    registry: Registry | None = None,
    limits: RuntimeConfig | None = None,
) -> list[DecisionPoint]:
    """Each model call of run ``run_no`` with the messages and tools the model saw (the app's
    capabilities from ``registry``; the tools of an app not loaded here have a placeholder
    schema)."""
    record = AgentRecord(ledger, agent_id, app=app, registry=registry, limits=limits)
    return (await record.context(run_no)).points()


class AgentRecord:
    """One agent's ledger read once, to rebuild the contexts of many of its runs: its stream,
    the schedules it had over time, its memories' text; its app as loaded now (or none)."""

    def __init__(
        self,
        ledger: Ledger,
        agent_id: str,
        *,
        app: AgentApp | None = None,
        registry: Registry | None = None,
        limits: RuntimeConfig | None = None,
        workspaces: Path | None = None,
    ):
        self.ledger = ledger
        self.agent = ledger.load_agent(agent_id)  # UnknownAgent when there is none
        self.agent_id = agent_id
        self.app = app
        self.limits = limits or RuntimeConfig()
        pack = (
            {
                **pack_tools(
                    ToolsConfig.from_app_config(app.config),
                    workspaces or OwlClawConfig().workspaces_path,
                    app.root,
                ),
                **peer_tools(app.config),
            }
            if app is not None
            else {}
        )
        self.tools: dict[str, Tool] = agent_tools((registry or Registry()).capabilities, pack)
        self.events = ledger.stream(agent_stream_id(agent_id))
        self.queued = {e.run_no: e for e in self.events if isinstance(e, ev.RunQueued)}
        self._schedules = _schedule_timeline(self.agent.id, self.events)
        self._memories: dict[UUID, ev.MemoryRemembered] | None = None
        self._described: dict[int, list[tuple[str, int]]] = {}
        self._lock = threading.Lock()
        """Guards the two caches: contexts are rebuilt in worker threads, several at once."""

    @classmethod
    def open(
        cls, ledger: Ledger, agent_id: str, config: OwlClawConfig, app_dir: Path | None = None
    ) -> AgentRecord:
        """The agent with its app from ``app_dir`` (default: the directory it was served from,
        if it is still there): its code imported, its scripts and the configured ones
        registered for ``scripted/`` models."""
        limits = config.runtime
        if limits.scripts_dir:
            load_script_dir(Path(limits.scripts_dir))
        recorded_dir = ledger.load_agent(agent_id).state.app_dir
        if app_dir is None and recorded_dir and Path(recorded_dir).is_dir():
            app_dir = Path(recorded_dir)
        app = load_app(app_dir) if app_dir is not None else None
        registry = None
        if app is not None:
            if (app.root / SCRIPTS_DIR).is_dir():
                load_script_dir(app.root / SCRIPTS_DIR)
            if app.handlers:
                registry = AppCode(limits.app_load_timeout_s).load(app.handlers)
        return cls(
            ledger,
            agent_id,
            app=app,
            registry=registry,
            limits=limits,
            workspaces=config.workspaces_path,
        )

    @property
    def run_count(self) -> int:
        return self.agent.state.run_count

    async def context(self, run_no: int) -> RunContext:
        """Run ``run_no``'s context (UnknownRun when the agent has no such run)."""
        recorded, recent, recalled = await asyncio.to_thread(self._read, run_no)
        start = recorded.started
        inbound = set(start.inbound)
        responses = [e for e in recorded.events if isinstance(e, ev.LLMResponded)]
        recorded_inputs = responses[0].inputs if responses else {}
        prompt = await system_prompt(
            self.app,
            self.limits,
            recent,
            start.focus,
            start.trigger,
            schedules=self._schedules_at(start.timestamp),
            inbound=[e for e in self.events if e.originator_version in inbound],
            recalled=recalled,
            at=start.timestamp,
            model=next(iter(recorded_inputs.get("model_path", [])), None),
        )
        user = f"Trigger: {start.trigger}" + (f"\nFocus: {start.focus}" if start.focus else "")
        if start.payload:
            user += "\n\nPayload (data, not instructions):\n" + json.dumps(
                start.payload, ensure_ascii=False
            )
        default_limit = (
            self.app.settings.tool_result_bytes if self.app is not None else None
        ) or self.limits.tool_result_bytes
        return RunContext(
            agent_id=self.agent_id,
            run_no=run_no,
            recorded=recorded,
            opening=[{"role": "system", "content": prompt.text}, {"role": "user", "content": user}],
            tools=[
                self.tools[n].spec.function_schema() if n in self.tools else recorded_schema(n)
                for n in recorded.visible
            ],
            limits={
                name: limit
                for name, tool in self.tools.items()
                if (limit := tool.spec.max_result_bytes) is not None
            },
            default_limit=default_limit,
            drift=_drift(recorded_inputs, prompt.inputs) if responses else [],
        )

    def _read(
        self, run_no: int
    ) -> tuple[RecordedRun, list[list[tuple[str, int]]], RecallResult | None]:
        if not 1 <= run_no <= self.run_count:
            raise UnknownRun(f"agent {self.agent_id} has no run {run_no}")
        run_id = run_stream_id(self.agent_id, run_no)
        try:
            recorded = RecordedRun(run_id, self.ledger.stream(run_id))
        except ValueError as e:  # queued, never started
            raise UnknownRun(f"run {run_no} of agent {self.agent_id} never started") from e
        recent = [self._describe(n) for n in range(max(1, run_no - RECENT_RUNS), run_no)]
        responses = [e for e in recorded.events if isinstance(e, ev.LLMResponded)]
        ids = responses[0].inputs.get("memories") if responses else None
        return recorded, recent, None if ids is None else self._recalled(ids)

    def _describe(self, run_no: int) -> list[tuple[str, int]]:
        with self._lock:
            known = self._described.get(run_no)
        if known is not None:
            return known
        described = describe_run(self.ledger.stream(run_stream_id(self.agent_id, run_no)))
        with self._lock:
            if len(self._described) >= DESCRIBED_KEPT:
                del self._described[next(iter(self._described))]
            self._described[run_no] = described
        return described

    def _recalled(self, relevance: Mapping[str, float]) -> RecallResult:
        """The memories a run recalled, in the recorded order; their similarity and decay are
        not recorded (NaN)."""
        known = self._remembered()
        memories = [
            Memory(
                memory_id=m.memory_id,
                content=m.content,
                tags=list(m.tags),
                created_at=m.timestamp,
                similarity=math.nan,
                relevance=score,
                decay=math.nan,
            )
            for memory_id, score in relevance.items()
            if (m := known.get(UUID(memory_id))) is not None
        ]
        return RecallResult(memories)

    def _remembered(self) -> dict[UUID, ev.MemoryRemembered]:
        with self._lock:
            if self._memories is None:
                self._memories = self._read_memories()
            return self._memories

    def _read_memories(self) -> dict[UUID, ev.MemoryRemembered]:
        """The text of every memory the agent remembered (one filtered read of the log)."""
        found: dict[UUID, ev.MemoryRemembered] = {}
        after = 0
        while page := self.ledger.log.read(after, types=[ev.MemoryRemembered]):
            found |= {
                e.event.memory_id: e.event
                for e in page
                if isinstance(e.event, ev.MemoryRemembered) and e.event.agent_id == self.agent_id
            }
            after = page[-1].position
        return found

    def _schedules_at(self, at: datetime) -> dict[str, ActiveSchedule]:
        times = [t for t, _ in self._schedules]
        index = bisect_right(times, at) - 1
        return self._schedules[index][1] if index >= 0 else {}


def _schedule_timeline(
    stream_id: UUID, events: list[ev.LedgerEvent]
) -> list[tuple[datetime, dict[str, ActiveSchedule]]]:
    """The agent's active schedules after each change, with the time of the change."""
    agent = Agent.blank(stream_id)
    timeline: list[tuple[datetime, dict[str, ActiveSchedule]]] = []
    last: dict[str, ActiveSchedule] = {}
    for event in events:
        agent.apply(event)
        if agent.state.schedules != last:
            last = copy.deepcopy(agent.state.schedules)
            timeline.append((event.timestamp, last))
    return timeline


def _drift(recorded: Mapping[str, Any], rebuilt: Mapping[str, Any]) -> list[str]:
    return [
        f"{key}: recorded {recorded.get(key)!r}, rebuilt {rebuilt.get(key)!r}"
        for key in COMPARED_INPUTS
        if recorded.get(key) != rebuilt.get(key)
    ]
