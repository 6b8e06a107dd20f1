"""Write the golden ledger, tests/data/golden-ledger/ledger.jsonl (format: tests/golden_ledger.py).

    .venv/bin/python scripts/make-golden-ledger.py [--force]

Today's code serves the agent of tests/data/golden-ledger/app/ in this process (the scripted
model, an embedded PostgreSQL in a temporary directory, no Ray, no timer service) through every
kind of step a ledger holds: completed runs with built-in and capability tool calls, a decision,
memories remembered and forgotten, schedules (once and cron, one cancelled, one fired into a
run), an approval asked and granted, a sub-agent's run, and a run left parked for an approval.

A maintainer's tool, run once per ledger format, not an ``owlclaw`` command: the golden file is
test data, and a committed one is never rewritten (``--force`` to replace it anyway).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from actors.host import AgentHost  # noqa: E402 - after the repository is on the path
from events import Ledger  # noqa: E402
from events import catalog as ev  # noqa: E402
from owlclaw.config import OwlClawConfig  # noqa: E402
from owlclaw.database import open_database  # noqa: E402
from owlclaw.messages import AnswerApproval, Decision, Fire, Result, Submit  # noqa: E402
from owlclaw.reports.approvals import pending  # noqa: E402
from tests.golden_ledger import APP, LEDGER_FILE, RECORDED_APP, dump  # noqa: E402

AGENT = "golden"
PATIENCE_S = 120.0


def ended(ledger: Ledger, run_id: str) -> ev.LedgerEvent:
    """The run's end event, once it has one."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        end = [e for e in ledger.stream(uuid.UUID(run_id)) if isinstance(e, ev.RunEnded)]
        if end:
            return end[0]
        time.sleep(0.1)
    raise TimeoutError(f"run {run_id} did not end in {PATIENCE_S} s")


async def story(ledger: Ledger, app_dir: str) -> None:
    host = AgentHost(ledger, OwlClawConfig())
    try:
        ledger.attach_app(AGENT, app_dir)

        async def run(focus: str) -> None:
            run_id = await host.ask(Submit(agent_id=AGENT, trigger="webhook", focus=focus))
            end = await asyncio.to_thread(ended, ledger, run_id)
            assert isinstance(end, ev.RunCompleted), end

        async def parked(focus: str) -> str:
            run_id = await host.ask(Submit(agent_id=AGENT, trigger="webhook", focus=focus))
            result = await host.ask(Result(agent_id=AGENT, run_id=run_id))
            assert result.status == "parked", result
            [approval] = [a for a in pending(ledger, [AGENT]) if a.run_id == run_id]
            return approval.approval_id

        await run("check the market")
        await run("plan follow-ups")
        await run("tidy memory")
        approval_id = await parked("buy ACME 100")
        decision = Decision(approval_id, True, "golden-operator", "within the limit")
        answer = await host.ask(AnswerApproval(agent_id=AGENT, decision=decision))
        await asyncio.to_thread(ended, ledger, answer.run_id)
        await run("research owls")
        schedules = ledger.load_agent(AGENT).state.schedules
        [(schedule_id, once)] = [(i, s) for i, s in schedules.items() if s.kind == "once"]
        assert once.fire_at is not None
        fired = await host.ask(
            Fire(agent_id=AGENT, schedule_id=schedule_id, fire_time=once.fire_at)
        )
        assert fired.run_id is not None, fired
        await asyncio.to_thread(ended, ledger, fired.run_id)
        await parked("buy ACME 500")
    finally:
        await host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="replace a committed golden ledger")
    args = parser.parse_args()
    if LEDGER_FILE.exists() and not args.force:
        sys.exit(f"{LEDGER_FILE} exists: a golden ledger is never rewritten (--force to replace)")
    shutil.rmtree(RECORDED_APP, ignore_errors=True)
    shutil.copytree(
        APP, RECORDED_APP, ignore=shutil.ignore_patterns("__pycache__")
    )  # the path the ledger records, the same on every machine
    try:
        with tempfile.TemporaryDirectory(prefix="golden-") as data_dir:
            server = open_database(OwlClawConfig(data_dir=data_dir, database_name="postgres"))
            database = server.create_database("golden")
            with Ledger(database.url) as ledger:
                asyncio.run(story(ledger, str(RECORDED_APP)))
            LEDGER_FILE.write_text("\n".join(dump(database.url)) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(RECORDED_APP.parent)
    print(f"wrote {LEDGER_FILE} ({LEDGER_FILE.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
