"""``owlclaw eval``: a candidate model re-decides many recorded runs; results in the ledger.

Runs are chosen by number range, trigger, focus text and time window, and re-decided
concurrently within a bound (``redecide`` at every decision point of each). Each eval writes
its own stream (``eval_stream_id``): EvalStarted, one EvalRunCompared per run, EvalFinished, so
two candidates can be compared later from the ledger alone. A run with no decision point (a
skipped heartbeat, a run whose app did not load) is left out and listed as skipped.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, get_args

import msgspec

from events import Ledger, UnknownRun
from events import catalog as ev
from events.streams import eval_stream_id
from owlclaw.audit.decision_points import AgentRecord
from owlclaw.audit.redecide import Outcome, ReDecision, redecide

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


class SelectorError(ValueError):
    """A run selector that does not parse."""


class UnknownEval(LookupError):
    def __str__(self) -> str:
        return str(self.args[0])


class RunSelector(msgspec.Struct, frozen=True, omit_defaults=True):
    """Which recorded runs: numbers (``1..50``, ``7``, ``1,4,10..20``), trigger, focus text
    (case-insensitive substring) and queue time window (``since`` inclusive, ``until``
    exclusive); all given criteria must hold."""

    runs: str | None = None
    trigger: str | None = None
    focus: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def numbers(self) -> set[int] | None:
        """The run numbers ``runs`` names (None: every run)."""
        if self.runs is None:
            return None
        chosen: set[int] = set()
        for part in self.runs.split(","):
            low, dots, high = part.strip().partition("..")
            try:
                first, last = int(low), int(high) if dots else int(low)
            except ValueError:
                raise SelectorError(
                    f"run selector {self.runs!r}: {part.strip()!r} is not N or N..M"
                ) from None
            if first < 1 or last < first:
                raise SelectorError(f"run selector {self.runs!r}: {part.strip()!r} is empty")
            chosen |= set(range(first, last + 1))
        return chosen

    def select(self, record: AgentRecord) -> list[int]:
        """The agent's run numbers that match, in order (a time without a zone is UTC)."""
        numbers = self.numbers()
        focus = self.focus.lower() if self.focus else None
        since, until = as_utc(self.since), as_utc(self.until)
        return [
            n
            for n, queued in sorted(record.queued.items())
            if (numbers is None or n in numbers)
            and (self.trigger is None or queued.trigger == self.trigger)
            and (focus is None or focus in (queued.focus or "").lower())
            and (since is None or queued.timestamp >= since)
            and (until is None or queued.timestamp < until)
        ]


def as_utc(at: datetime | None) -> datetime | None:
    """``at``, read as UTC when it has no zone."""
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


@dataclass
class EvalReport:
    """An eval as its stream records it."""

    eval_id: str
    agent_id: str
    model: str
    selector: dict[str, Any]
    runs: list[ev.EvalRunCompared] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    finished: bool = False
    duration_ms: float = 0.0

    @classmethod
    def of(cls, events: list[ev.LedgerEvent]) -> EvalReport:
        if not events or not isinstance(started := events[0], ev.EvalStarted):
            raise UnknownEval("no such eval")
        report = cls(started.eval_id, started.agent_id, started.model, dict(started.selector))
        report.runs = sorted(
            (e for e in events if isinstance(e, ev.EvalRunCompared)), key=lambda r: r.run_no
        )
        compared = {r.run_no for r in report.runs}
        finished = [e for e in events if isinstance(e, ev.EvalFinished)]
        report.finished = bool(finished)
        report.duration_ms = finished[0].duration_ms if finished else 0.0
        report.skipped = [n for n in started.run_nos if n not in compared] if finished else []
        return report

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(r.outcome for r in self.runs)
        return {o: counted.get(o, 0) for o in OUTCOMES}

    @property
    def divergent_fraction(self) -> float:
        """Runs not decided identically (refused ones included) over runs compared."""
        if not self.runs:
            return 0.0
        return round(sum(r.outcome != "identical" for r in self.runs) / len(self.runs), 6)

    def totals(self) -> dict[str, float]:
        return {
            "recorded_tokens": sum(r.recorded_tokens for r in self.runs),
            "candidate_tokens": sum(r.candidate_tokens for r in self.runs),
            "recorded_cost_usd": round(sum(r.recorded_cost_usd for r in self.runs), 8),
            "candidate_cost_usd": round(sum(r.candidate_cost_usd for r in self.runs), 8),
        }

    def as_dict(self) -> dict[str, Any]:
        totals = self.totals()
        return {
            "eval_id": self.eval_id,
            "agent_id": self.agent_id,
            "model": self.model,
            "selector": self.selector,
            "finished": self.finished,
            "runs": len(self.runs),
            "counts": self.counts,
            "decisions": {
                "asked": sum(r.decisions for r in self.runs),
                "same": sum(r.same for r in self.runs),
            },
            "divergent_fraction": self.divergent_fraction,
            **totals,
            "tokens_delta": totals["candidate_tokens"] - totals["recorded_tokens"],
            "cost_delta_usd": round(totals["candidate_cost_usd"] - totals["recorded_cost_usd"], 8),
            "diverging": [
                {
                    "run_no": r.run_no,
                    "outcome": r.outcome,
                    "step": r.first_divergence,
                    "recorded": r.recorded,
                    "candidate": r.candidate,
                }
                for r in self.runs
                if r.outcome != "identical"
            ],
            "skipped": self.skipped,
            "duration_ms": self.duration_ms,
        }


def load_eval(ledger: Ledger, eval_id: str) -> EvalReport:
    events = ledger.stream(eval_stream_id(eval_id))
    if not events:
        raise UnknownEval(f"no eval {eval_id!r} in the ledger")
    return EvalReport.of(events)


class _EvalWriter:
    """Appends the eval's events in order, from one thread (the eval is its only writer)."""

    def __init__(self, ledger: Ledger, eval_id: str):
        self.ledger = ledger
        self.stream = eval_stream_id(eval_id)
        self.version = 0
        self.events: list[ev.LedgerEvent] = []
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"eval-{eval_id}")

    def record(self, event_class: type[ev.LedgerEvent], **fields: Any) -> asyncio.Future[Any]:
        self.version += 1
        event = event_class(
            originator_id=self.stream,
            originator_version=self.version,
            timestamp=datetime.now(UTC),
            **fields,
        )
        self.events.append(event)
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._io, self.ledger.append_events, [event])

    def close(self) -> None:
        self._io.shutdown(wait=True)


def compared(redecision: ReDecision) -> dict[str, Any]:
    """The fields of a run's EvalRunCompared."""
    steps = redecision.steps
    diverged: dict[str, Any] = {}
    if (first := redecision.first_divergence) is not None:
        candidate = first.candidate
        diverged = {
            "first_divergence": first.step,
            "recorded": "" if first.recorded is None else str(first.recorded),
            "candidate": (first.error or "") if candidate is None else str(candidate),
        }
    return {
        "run_no": redecision.run_no,
        "outcome": redecision.outcome,
        "decisions": len(steps),
        "same": sum(s.same for s in steps),
        **diverged,
        "recorded_tokens": sum(s.recorded_tokens for s in steps),
        "candidate_tokens": sum(s.candidate_tokens for s in steps),
        "recorded_cost_usd": sum(s.recorded_cost_usd for s in steps),
        "candidate_cost_usd": sum(s.candidate_cost_usd for s in steps),
    }


async def evaluate(
    litellm: Any,
    record: AgentRecord,
    model: str,
    selector: RunSelector,
    *,
    concurrency: int = 4,
    app_dir: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """Re-decide the selected runs with ``model``, at most ``concurrency`` at a time, recording
    the eval's stream as it goes; ``progress(done, total)`` after each run."""
    numbers = selector.select(record)
    eval_id = uuid.uuid4().hex[:12]
    writer = _EvalWriter(record.ledger, eval_id)
    began = time.perf_counter()
    gate = asyncio.Semaphore(concurrency)
    done = 0
    timeout_s = record.limits.llm_timeout_s

    async def one(run_no: int) -> None:
        nonlocal done
        async with gate:
            try:
                context = await record.context(run_no)
            except UnknownRun:  # queued, never started: skipped
                context = None
            if context is not None and context.responses:
                redecision = await redecide(litellm, context, model, timeout_s=timeout_s)
                await writer.record(ev.EvalRunCompared, **compared(redecision))
        done += 1
        if progress is not None:
            progress(done, len(numbers))

    try:
        await writer.record(
            ev.EvalStarted,
            eval_id=eval_id,
            agent_id=record.agent_id,
            model=model,
            selector=msgspec.to_builtins(selector),
            run_nos=numbers,
            app_dir=app_dir,
        )
        await asyncio.gather(*(one(n) for n in numbers))
        report = EvalReport.of(writer.events)
        await writer.record(
            ev.EvalFinished,
            runs=len(report.runs),
            counts=report.counts,
            divergent_fraction=report.divergent_fraction,
            duration_ms=round((time.perf_counter() - began) * 1000, 3),
            **report.totals(),
        )
    finally:
        writer.close()
    return EvalReport.of(writer.events)


@dataclass
class EvalComparison:
    """Two evals' outcomes run by run, over the runs both compared."""

    a: EvalReport
    b: EvalReport
    changed: list[dict[str, Any]] = field(default_factory=list)
    """Runs whose outcome differs between the two."""

    @classmethod
    def of(cls, a: EvalReport, b: EvalReport) -> EvalComparison:
        outcomes_b = {r.run_no: r for r in b.runs}
        changed = [
            {"run_no": r.run_no, "a": r.outcome, "b": other.outcome}
            for r in a.runs
            if (other := outcomes_b.get(r.run_no)) is not None and other.outcome != r.outcome
        ]
        return cls(a, b, changed)

    def as_dict(self) -> dict[str, Any]:
        common = {r.run_no for r in self.a.runs} & {r.run_no for r in self.b.runs}
        return {
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "common_runs": len(common),
            "changed": self.changed,
        }
