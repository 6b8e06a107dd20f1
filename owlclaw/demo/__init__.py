"""``owlclaw demo``: the seeds' trading agent through the four acceptance scenarios of the
built-in tools, a fifth where a large order waits for a person's approval and a sixth where the
agent asks a person a question (ask_human) and goes on with the answer, on the embedded
default — real PostgreSQL + pgvector, Ray actors, projections,
the timer service (the locally built Hatchet engine when there is one, else the built-in
backend), the local embedding model and the webhook endpoint. The model is the scripted
provider playing ``trading/scripts/trader.json``; the market is ``market.json``, rewritten here
as the story goes on.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.client import ServerClient
from owlclaw.compose.read import open_view
from owlclaw.config import OwlClawConfig
from owlclaw.messages import Submit
from owlclaw.reports.narrate import step_text
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from owlclaw.timers.hatchet_engine import BINARIES
from projections import MemoryView, ProjectionRunner
from projections.feed import afollow_run
from projections.memory_files import render_memory_files

AGENT = "trader"
QUESTION_ANSWER = "take profit"
"""What the demo's operator answers the agent's question (one of its options)."""
APPROVAL_PAUSE_S = 3.0
"""How long the demo's operator looks at the order before approving it."""
PAST_DUE_S = 3.0
"""How long past a cancelled schedule's fire time the demo looks for its fire (fires arrive
within ~0.2 s of their time here)."""
SCHEDULE_WAIT_S = 90.0
"""Longest wait for a timer fire (Hatchet's engine polls its schedules every few seconds)."""


@dataclass
class DemoReport:
    agent_id: str
    runs: list[str] = field(default_factory=list)
    memory_md: Path | None = None
    verified_events: int = 0
    fired_run_no: int = 0
    """The run the first timer started (the one to replay)."""
    seconds: float = 0.0


def demo_config(config: OwlClawConfig) -> OwlClawConfig:
    """The configuration with Ray actors (shared placement) and Hatchet if it was built."""
    bin_dir = Path(config.timers.hatchet_bin or config.data_path / "bin")
    backend = "hatchet" if all((bin_dir / b).is_file() for b in BINARIES) else "builtin"
    raw = msgspec.to_builtins(config)
    raw["runtime"] |= {"placement": "shared"}
    raw["timers"] |= {"backend": backend, "hatchet_bin": str(bin_dir)}
    return msgspec.convert(raw, OwlClawConfig)


class Demo:
    def __init__(self, config: OwlClawConfig, console: Console):
        self.config = demo_config(config)
        self.console = console
        self.started = time.monotonic()
        self.app_dir = self.config.data_path / "demo" / AGENT
        self.report = DemoReport(AGENT)

    # --- narration ------------------------------------------------------------------------

    def say(self, text: str, style: str = "") -> None:
        elapsed = time.monotonic() - self.started
        text = escape(text)
        line = f"[dim]{elapsed:6.1f}s[/] " + (f"[{style}]{text}[/]" if style else text)
        self.console.print(line, highlight=False, soft_wrap=True)

    def scenario(self, title: str) -> None:
        self.console.print(f"\n[bold cyan]{title}[/]", highlight=False)

    def market(self, **state: Any) -> None:
        (self.app_dir / "market.json").write_text(json.dumps(state), encoding="utf-8")
        self.say(f"market feed: {json.dumps(state)}", "yellow")

    # --- the story ------------------------------------------------------------------------

    async def run(self) -> DemoReport:
        if self.app_dir.exists():
            shutil.rmtree(self.app_dir)
        self.app_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(
            Path(str(resources.files("owlclaw") / "demo" / "trading")),
            self.app_dir,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        service = Service(
            self.config, [load_app(self.app_dir)], progress=lambda p: self.say(f"starting {p}…")
        )
        async with serving(service, self.config):
            self.say(
                f"serving {AGENT}: Ray actors (shared placement), timers on "
                f"{service.timer_backend}, webhook http://{self.config.server.host}:"
                f"{self.config.server.port}",
                "green",
            )
            assert service.ledger is not None
            await self.story(service, service.ledger)
            self.finish(service.ledger)
        self.report.seconds = round(time.monotonic() - self.started, 1)
        return self.report

    async def story(self, service: Service, ledger: Ledger) -> None:
        self.scenario("Scenario 1 — the agent schedules its own re-check")
        self.market(is_trading_time=True, session="open", volatility="high", rebound_signal=False)
        run_id = await self.webhook_trigger("check entry opportunities")
        await self.follow(ledger, run_id)
        first_schedule = self.scheduled(ledger, run_id)

        self.scenario("Scenario 4 — a schedule that is no longer needed is cancelled")
        self.market(is_trading_time=True, session="halted", volatility="high", rebound_signal=False)
        run_id = await service.ask(
            Submit(agent_id=AGENT, trigger="webhook", focus="pre-close review")
        )
        await self.follow(ledger, run_id)
        cancelled = self.scheduled(ledger, run_id)

        # Scenarios 3 and 5 need no timer: they run while the first schedule's timer waits.
        self.scenario("Scenario 3 — outside trading hours the agent decides to do nothing")
        self.market(is_trading_time=False, session="closed")
        run_id = await service.ask(Submit(agent_id=AGENT, trigger="heartbeat"))
        await self.follow(ledger, run_id)
        self.say("an inbound event arrives through the webhook: the session closed")
        await asyncio.to_thread(self.webhook_event, {"event": "session_closed"})
        run_id = await service.ask(Submit(agent_id=AGENT, trigger="heartbeat"))
        await self.follow(ledger, run_id)

        self.scenario("Scenario 5 — a large order waits for a person's approval")
        self.market(is_trading_time=True, session="open", volatility="falling", rebound_signal=True)
        run_id = await service.ask(
            Submit(agent_id=AGENT, trigger="webhook", focus="rebound confirmed: buy ACME")
        )
        seen = await self.follow(ledger, run_id, until_parked=True)
        parked = seen[-1]
        assert isinstance(parked, ev.RunParked), f"run {run_id} did not park: {parked}"
        await self.approve_from_the_cli(parked.approval_id)
        await self.follow(ledger, run_id, skip=len(seen))

        self.scenario("Scenario 6 — the agent asks a person, and goes on with the answer")
        run_id = await service.ask(
            Submit(agent_id=AGENT, trigger="webhook", focus="position review: ask the desk")
        )
        seen = await self.follow(ledger, run_id, until_parked=True)
        parked = seen[-1]
        assert isinstance(parked, ev.RunParked), f"run {run_id} did not park: {parked}"
        await self.answer_from_the_cli(parked.approval_id)
        await self.follow(ledger, run_id, skip=len(seen))

        self.scenario("Scenario 1 (cont.) — the timer fires into a new run with its focus")
        self.market(is_trading_time=True, session="open", volatility="falling", rebound_signal=True)
        fired_run = await self.wait_for_fire(ledger, first_schedule)
        started = (await self.follow(ledger, fired_run))[0]
        assert isinstance(started, ev.RunStarted)
        self.report.fired_run_no = started.run_no

        self.scenario("Scenario 2 — a lesson remembered is recalled when it matters")
        self.market(is_trading_time=True, session="open", volatility="high", index_change_pct=-4.2)
        run_id = await service.ask(
            Submit(
                agent_id=AGENT,
                trigger="webhook",
                focus="market alert: ACME index -4.2% in 10 minutes",
            )
        )
        await self.follow(ledger, run_id)

        self.scenario("Scenario 4 (cont.) — the cancelled schedule never runs")
        await self.wait_past(ledger, cancelled)

    async def webhook_trigger(self, focus: str) -> str:
        """A trigger through the HTTP endpoint, as an outside system sends it."""
        with ServerClient(self.config) as client:
            accepted = await asyncio.to_thread(client.submit, AGENT, focus, {"symbol": "ACME"})
        self.say(f"webhook POST /agents/{AGENT}/trigger → run {accepted['run_id'][:8]} accepted")
        return str(accepted["run_id"])

    def webhook_event(self, payload: dict[str, Any]) -> None:
        with ServerClient(self.config) as client:
            client.receive(AGENT, "market-feed", payload)

    async def follow(
        self, ledger: Ledger, run_id: str, *, until_parked: bool = False, skip: int = 0
    ) -> list[ev.LedgerEvent]:
        """Narrate the run's steps as they are committed (after the first ``skip``), until it
        ends or, with ``until_parked``, waits for an approval."""
        if run_id not in self.report.runs:
            self.report.runs.append(run_id)
        events = []
        async for event in afollow_run(ledger, run_id, until_parked=until_parked):
            events.append(event)
            if len(events) > skip and (text := step_text(event)):
                self.say(("  " if not isinstance(event, ev.RunStarted) else "") + text)
        return events

    async def approve_from_the_cli(self, approval_id: str) -> None:
        """What an operator does: look at the request, then `owlclaw approve` it."""
        with ServerClient(self.config) as client:  # the server runs on this event loop
            requests = await asyncio.to_thread(client.approvals, None)
        [request] = [a for a in requests.pending if a.approval_id == approval_id]
        self.say(
            f"approval requested: {request.tool}({json.dumps(request.arguments)}) because "
            f"{request.reason}; the run holds no process while it waits",
            "yellow",
        )
        until = time.time() + APPROVAL_PAUSE_S
        with self.countdown("a person reviews the order", until) as tick:
            while time.time() < until:
                tick()
                await asyncio.sleep(0.2)
        command = ["owlclaw", "approve", approval_id, "--note", "within today's risk limit"]
        self.say("$ " + " ".join(command[:3]) + ' --note "within today\'s risk limit"')
        await self.as_operator(command, request.digest)

    async def answer_from_the_cli(self, approval_id: str) -> None:
        """What an operator does with a question: read it, then `owlclaw answer` it."""
        with ServerClient(self.config) as client:
            requests = await asyncio.to_thread(client.approvals, None)
        [request] = [a for a in requests.pending if a.approval_id == approval_id]
        options = request.arguments["options"]
        self.say(
            f"question for a person: {request.arguments['question']} (options: "
            f"{', '.join(options)}); the run holds no process while it waits",
            "yellow",
        )
        command = ["owlclaw", "answer", approval_id, QUESTION_ANSWER]
        self.say(f'$ owlclaw answer {approval_id} "{QUESTION_ANSWER}"')
        await self.as_operator(command, request.digest)

    async def as_operator(self, command: list[str], digest: str) -> None:
        """Run an ``owlclaw`` answer command as the demo's operator, for the pending request
        of ``digest``; print what it said."""
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", *command, "--by", "demo-operator", "--digest", digest],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(command[:2])} failed: {done.stderr}")
        self.say(" ".join(done.stdout.split()), "green")

    @staticmethod
    def scheduled(ledger: Ledger, run_id: str) -> ev.ScheduleRequested:
        agent_events = ledger.stream(ledger.load_agent(AGENT).id)
        return next(
            e
            for e in reversed(agent_events)
            if isinstance(e, ev.ScheduleRequested) and str(e.owner_run_id) == run_id
        )

    async def wait_for_fire(self, ledger: Ledger, schedule: ev.ScheduleRequested) -> str:
        """The run the schedule's fire started, with a progress bar while waiting."""
        fire_at = schedule.fire_at.timestamp() if schedule.fire_at else time.time()
        due_in = fire_at - time.time()
        self.say(f"waiting for timer {schedule.schedule_id} (due in {due_in:.0f} s)")
        with self.countdown(f"timer {schedule.schedule_id}", fire_at) as tick:
            deadline = time.monotonic() + SCHEDULE_WAIT_S
            while time.monotonic() < deadline:
                tick()
                for e in await asyncio.to_thread(ledger.stream, ledger.load_agent(AGENT).id):
                    if isinstance(e, ev.TimerFired) and e.schedule_id == schedule.schedule_id:
                        late = (e.timestamp - e.fire_time).total_seconds()
                        self.say(f"TimerFired {schedule.schedule_id} ({late:.1f} s after due)")
                        return str(e.run_id)
                await asyncio.sleep(0.2)
        raise TimeoutError(f"timer {schedule.schedule_id} did not fire in {SCHEDULE_WAIT_S} s")

    async def wait_past(self, ledger: Ledger, schedule: ev.ScheduleRequested) -> None:
        due = schedule.fire_at.timestamp() if schedule.fire_at else time.time()
        fire_at = due + PAST_DUE_S
        label = f"past the cancelled fire time of {schedule.schedule_id}"
        with self.countdown(label, fire_at) as tick:
            while time.time() < fire_at:
                tick()
                await asyncio.sleep(0.2)
        fired = [
            e
            for e in await asyncio.to_thread(ledger.stream, ledger.load_agent(AGENT).id)
            if isinstance(e, ev.TimerFired) and e.schedule_id == schedule.schedule_id
        ]
        if fired:
            raise AssertionError(f"cancelled schedule {schedule.schedule_id} fired: {fired}")
        ago = time.time() - due
        self.say(f"{schedule.schedule_id} was due {ago:.0f} s ago: no fire, no run", "green")

    @contextmanager
    def countdown(self, label: str, until: float) -> Iterator[Callable[[], None]]:
        """A progress bar that fills up until the wall-clock time ``until``."""
        total = max(0.1, until - time.time())
        columns = (TextColumn("        {task.description}"), BarColumn(), TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            task = progress.add_task(label, total=total)
            yield lambda: progress.update(task, completed=total - max(0.0, until - time.time()))

    # --- the end --------------------------------------------------------------------------

    def finish(self, ledger: Ledger) -> None:
        self.scenario("What the ledger holds")
        view = open_view(ledger, self.config, MemoryView)
        ProjectionRunner(ledger, view).catch_up()
        memory_md, _ = render_memory_files(view, AGENT, self.config.memory_path / AGENT)
        self.report.memory_md = memory_md
        self.say(f"MEMORY.md written: {memory_md}")
        agent = ledger.load_agent(AGENT)
        verified = ledger.chains.verify([agent.id, *agent.run_ids()])
        if not verified.ok:
            raise AssertionError(f"hash chains broken: {verified.breaks}")
        self.report.verified_events = verified.events
        self.say(f"hash chains intact: {verified.events} events in {verified.streams} streams")
