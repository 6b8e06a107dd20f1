"""Re-execute a recorded run for audit and report whether the same steps follow.

The run driver is primed with the run's recorded steps: model responses are served from the
record and tools return their recorded outcomes, so
what is checked is everything OwlClaw itself decides: tool visibility, argument validation,
governance, limits, the order of calls and how the run ends. Nothing is written to the ledger.
Like Temporal's replayer, a difference means today's code or configuration would not reproduce
the recorded run from the same model output.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from events import Ledger
from events import catalog as ev
from events.streams import run_stream_id
from owlclaw.app import AgentApp, load_app
from owlclaw.config import RuntimeConfig
from owlclaw.mcp.pool import McpPool
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.runtime.app_code import AppCode
from owlclaw.runtime.models import Answer
from owlclaw.runtime.recorded import RecordedRun
from owlclaw.tools.builtin.handlers import BUILTINS
from owlclaw.tools.capabilities import Registry
from owlclaw.tools.governance import Governance

EFFECTS = (
    ev.DecisionLogged,
    ev.PlanUpdated,
    ev.MemoryRemembered,
    ev.MessageSent,
    ev.RunWarning,
    ev.RunStarted,
    ev.SubAgentCharged,
)
"""Events a tool's execution or the environment writes: taken from the record, not compared
(spawn_agent charges its sub-agent's cost as it executes, which a replay does not)."""
PAUSES = (ev.RunParked, ev.RunInterrupted, ev.RunResumed)
"""Where a run stopped and went on (an approval, a crash): the replay runs straight through,
deciding each parked call with the answer the agent recorded, and a call the process stopped in
as the resumed run did (``Stopped``): its outcome unknown, the call run again only if that is
safe."""
OUTCOMES = (ev.ToolCallSucceeded, ev.ToolCallFailed, ev.ToolCallTimedOut, ev.ToolOutcomeUnknown)


@dataclass(frozen=True)
class Step:
    """One compared step of a run: its event type, what was compared, and that in words."""

    kind: str
    text: str
    fingerprint: tuple[Any, ...]

    @classmethod
    def of(cls, event: ev.LedgerEvent) -> Step:
        return cls(type(event).__name__, describe(event), fingerprint(event))


@dataclass(frozen=True)
class Difference:
    """Where the replay left the record: a recorded step it took differently or not at all,
    or a step only it took."""

    step: int
    """The recorded step's number: its event's version in the run stream, as ``owlclaw
    replay``, ``owlclaw ledger`` and the console's timeline number it. For a step only the
    replay took, the number of the recorded step it came after."""
    recorded: Step | None
    replay: Step | None

    def __str__(self) -> str:
        recorded, replay = self.recorded, self.replay
        if recorded is None:
            assert replay is not None
            head = f"after step {self.step}: a step the record does not have ({replay.kind})"
        else:
            head = f"step {self.step} ({recorded.kind})"
        shown = [recorded.text if recorded else "", replay.text if replay else ""]
        if shown[0] == shown[1] and recorded is not None and replay is not None:
            shown = [describe_fingerprint(recorded), describe_fingerprint(replay)]
        return (
            f"{head}\n"
            f"  recorded: {shown[0] if recorded else '(no such step)'}\n"
            f"  replay:   {shown[1] if replay else '(no such step)'}"
        )


@dataclass
class ReplayReport:
    agent_id: str
    run_no: int
    run_id: str
    matched: bool
    compared: int
    """How many steps the record has (the events compared; see ``fingerprint``)."""
    produced: int = 0
    """How many steps the replay took."""
    differences: list[Difference] = field(default_factory=list)


def fingerprint(event: ev.LedgerEvent) -> tuple[Any, ...]:  # noqa: PLR0911 - one per type
    """What must be equal for two runs to have taken the same step."""
    match event:
        case ev.LLMResponded(message=message):
            calls = [
                (c["function"]["name"], c["function"].get("arguments"))
                for c in message.get("tool_calls") or []
            ]
            return ("LLMResponded", message.get("content"), calls)
        case ev.VisibleToolsResolved(tools=tools, filtered=filtered):
            return ("VisibleToolsResolved", sorted(tools), sorted(filtered.items()))
        case ev.ToolCallRequested(tool=tool, arguments=arguments):
            return ("ToolCallRequested", tool, arguments)
        case ev.ToolCallDenied(tool=tool, error_code="RATE_LIMITED"):
            return ("ToolCallDenied", tool, "RATE_LIMITED")  # its reason says when to retry
        case ev.ToolCallDenied(tool=tool, reason=reason):
            return ("ToolCallDenied", tool, reason)
        case ev.ToolCallRejected(tool=tool, error=error):
            return ("ToolCallRejected", tool, error)
        case ev.ToolCallSucceeded(tool=tool, result=result):
            return ("ToolCallSucceeded", tool, result)
        case ev.ToolCallFailed(tool=tool, error_code=code):
            return ("ToolCallFailed", tool, code)
        case ev.ToolCallTimedOut(tool=tool) | ev.ToolOutcomeUnknown(tool=tool):
            return (type(event).__name__, tool)
        case ev.RunCompleted(answer=answer):
            return ("RunCompleted", answer)
        case ev.RunTerminated(reason=reason):
            return ("RunTerminated", reason)
    return (type(event).__name__,)


TEXT_CHARS = 300
"""A step's words are cut here (a difference beyond it is shown whole)."""


def describe(event: ev.LedgerEvent) -> str:  # noqa: PLR0911, PLR0912 - one per type
    """A compared step in words: what ``fingerprint`` compares of it."""
    match event:
        case ev.LLMResponded(message=message):
            calls = message.get("tool_calls") or []
            if not calls:
                return _cut(f"model answers {_json(message.get('content'))}")
            called = ", ".join(
                f"{c['function']['name']}({_arguments(c['function'].get('arguments'))})"
                for c in calls
            )
            return _cut(f"model calls {called}")
        case ev.VisibleToolsResolved(tools=tools, filtered=filtered):
            shown = ", ".join(sorted(tools)) or "none"
            hidden = ", ".join(f"{name} ({why})" for name, why in sorted(filtered.items()))
            return _cut(f"visible: {shown}; hidden: {hidden or 'none'}")
        case ev.ToolCallRequested(tool=tool, arguments=arguments):
            return _cut(f"tool {tool}: requested with {_json(arguments)}")
        case ev.ToolCallDenied(tool=tool, reason=reason):
            return _cut(f"tool {tool}: denied, {reason}")
        case ev.ToolCallRejected(tool=tool, error=error):
            return _cut(f"tool {tool}: rejected, {error}")
        case ev.ToolCallSucceeded(tool=tool, result=result):
            return _cut(f"tool {tool}: succeeded with {_json(result)}")
        case ev.ToolCallFailed(tool=tool, error_code=code):
            return _cut(f"tool {tool}: failed {code}")
        case ev.ToolCallTimedOut(tool=tool):
            return _cut(f"tool {tool}: timed out")
        case ev.ToolOutcomeUnknown(tool=tool):
            return _cut(f"tool {tool}: outcome unknown")
        case ev.RunCompleted(answer=answer):
            return _cut(f"run completed: {_json(answer)}")
        case ev.RunTerminated(reason=reason):
            return _cut(f"run terminated: {reason}")
        case ev.RunFailed(error=error):  # the error is not compared, but says why
            return _cut(f"run failed: {error}")
    return type(event).__name__


def describe_fingerprint(step: Step) -> str:
    """All that was compared of a step, for two steps whose cut words are the same."""
    return _json(list(step.fingerprint), cut=False)


def _json(value: Any, *, cut: bool = True) -> str:
    text = msgspec.json.encode(value, order="sorted", enc_hook=repr).decode()
    return _cut(text) if cut else text


def _arguments(arguments: Any) -> str:
    """A call's arguments as the model sent them (JSON text, usually)."""
    if isinstance(arguments, str):
        with contextlib.suppress(msgspec.DecodeError):
            return _json(msgspec.json.decode(arguments))
        return arguments
    return _json(arguments)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _steps(events: Sequence[ev.LedgerEvent]) -> list[tuple[int, Step]]:
    """The compared steps of a run with their events' versions. The outcomes of one model
    response's calls are compared after its requests, in call order: how a response's calls
    interleave is the scheduler's, not the run's (a batch's requests are recorded together and
    side-by-side calls finish in any order; a run recorded before parallel calls has each
    request followed by its outcome)."""
    compared = [e for e in events if e.stream == "run" and not isinstance(e, EFFECTS + PAUSES)]
    ordered: list[ev.LedgerEvent] = []
    response: list[ev.LedgerEvent] = []
    for event in compared:
        if isinstance(event, ev.LLMResponded):
            ordered += _calls_then_outcomes(response)
            response = []
        response.append(event)
    ordered += _calls_then_outcomes(response)
    return [(e.originator_version, Step.of(e)) for e in ordered]


def _calls_then_outcomes(response: list[ev.LedgerEvent]) -> list[ev.LedgerEvent]:
    """One response's steps: those before its last outcome with the outcomes after the rest,
    in the order their calls were requested (a call's executions in recorded order), then the
    steps after its last outcome (the run's end)."""
    last = max((i for i, e in enumerate(response) if isinstance(e, OUTCOMES)), default=-1)
    body, tail = response[: last + 1], response[last + 1 :]
    requested: dict[str, int] = {}
    for e in body:
        if isinstance(e, ev.ToolCallRequested):
            requested.setdefault(e.call_id, len(requested))
    outcomes = [e for e in body if isinstance(e, OUTCOMES)]
    outcomes.sort(key=lambda e: (requested.get(_call_id(e), len(requested)), _call_id(e)))
    return [e for e in body if not isinstance(e, OUTCOMES)] + outcomes + tail


def _call_id(event: ev.LedgerEvent) -> str:
    return str(getattr(event, "call_id", ""))


def compare(
    recorded: Sequence[ev.LedgerEvent], replayed: Sequence[ev.LedgerEvent]
) -> list[Difference]:
    """Where the replay's steps differ from the record's, aligned as a diff: a step one side
    inserted does not shift the rest into differences."""
    expected = _steps(recorded)
    got = [s for _, s in _steps(_without_newer_builtins(recorded, replayed))]
    keys = [
        [msgspec.json.encode(s.fingerprint, order="sorted", enc_hook=repr) for s in steps]
        for steps in ([s for _, s in expected], got)
    ]
    matcher = difflib.SequenceMatcher(None, keys[0], keys[1], autojunk=False)
    differences: list[Difference] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        after = expected[i2 - 1][0] if i2 > 0 else 1  # 1: RunStarted
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            if i < i2:
                version, step = expected[i]
                differences.append(Difference(version, step, got[j] if j < j2 else None))
            else:
                differences.append(Difference(after, None, got[j]))
    return differences


def _without_newer_builtins(
    recorded: Sequence[ev.LedgerEvent], replayed: Sequence[ev.LedgerEvent]
) -> list[ev.LedgerEvent]:
    """The replay with the built-in tools the recording code did not have (neither visible nor
    hidden in the record) left out of its tool lists: a built-in added since (update_plan) is
    no difference, as the recorded model could not have called it."""
    listed = [e for e in recorded if isinstance(e, ev.VisibleToolsResolved)]
    if not listed:
        return list(replayed)
    known = {t for e in listed for t in (*e.tools, *e.filtered)}
    newer = BUILTINS.keys() - known
    return [
        msgspec.structs.replace(
            e,
            tools=[t for t in e.tools if t not in newer],
            filtered={t: why for t, why in e.filtered.items() if t not in newer},
        )
        if isinstance(e, ev.VisibleToolsResolved)
        else e
        for e in replayed
    ]


class NoSuchRun(LookupError):
    """The agent has no run of that number."""

    def __str__(self) -> str:
        return str(self.args[0])


class _NoModel:
    """The ``Completer`` of a replay: the recorded responses answer every model call, and asking
    past them fails the run (``ReplayExhausted``) before a model is asked, so litellm (seconds to
    import) stays out of the verifying process."""

    async def complete(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], _: float
    ) -> Answer:
        raise RuntimeError(f"an audit replay asks no model ({model})")


def verify_run(
    ledger: Ledger,
    agent_id: str,
    run_no: int,
    app_dir: Path | None,
    limits: RuntimeConfig,
) -> ReplayReport:
    """``owlclaw replay --verify``, in the CLI or in ``owlclaw run``: run ``run_no`` re-executed
    with the agent's app (``app_dir``, else the directory it was last served from while that
    exists) and compared; UnknownAgent, NoSuchRun."""
    state = ledger.load_agent(agent_id).state
    if not 1 <= run_no <= state.run_count:
        raise NoSuchRun(f"agent {agent_id} has no run {run_no}")
    if app_dir is None and state.app_dir and Path(state.app_dir).is_dir():
        app_dir = Path(state.app_dir)
    loaded = load_app(app_dir) if app_dir is not None else None
    code = AppCode(limits.app_load_timeout_s)
    registry = code.load(loaded.handlers) if loaded and loaded.handlers else None
    return replay_run(ledger, agent_id, run_no, app=loaded, registry=registry, limits=limits)


def replay_run(
    ledger: Ledger,
    agent_id: str,
    run_no: int,
    *,
    app: AgentApp | None = None,
    registry: Registry | None = None,
    limits: RuntimeConfig | None = None,
    governance: Governance | None = None,
) -> ReplayReport:
    """Re-execute run ``run_no`` of ``agent_id`` from its recorded steps and compare them.

    The app's MCP servers are connected to have their tools listed (their calls settle with
    the recorded outcomes, as every tool's do), so the replay sees the tools the run saw."""
    run_id = run_stream_id(agent_id, run_no)
    recorded = RecordedRun(run_id, ledger.stream(run_id))
    mcp = McpPool()
    runtime = AgentRuntime(
        ledger,
        agent_id,
        models=[f"replay/{run_id}"],
        app=app,
        registry=registry,
        limits=limits,
        governance=governance,
        replay=recorded,
        mcp=mcp,
        llm=_NoModel(),
    )
    start = recorded.started

    async def replay() -> None:
        try:
            await runtime.run(start.trigger, start.focus, dict(start.payload), dict(start.context))
        finally:
            await mcp.close()

    try:
        asyncio.run(replay())
    finally:
        runtime.close()
    differences = compare(recorded.events, runtime.produced)
    return ReplayReport(
        agent_id=agent_id,
        run_no=run_no,
        run_id=str(run_id),
        matched=not differences,
        compared=len(_steps(recorded.events)),
        produced=len(_steps(runtime.produced)),
        differences=differences,
    )
