"""``owlclaw bench cli``: how long the commands a user types take, each a new process.

Sets up an app whose agent has one recorded 10-step run (six ``remember`` calls, three
``log_decision`` calls, an answer) on a scratch database, through a real ``owlclaw run`` (local
placement: the figures are the CLI's, not Ray's). Then times every reading command, ``memory
--recall`` and ``replay --verify`` (median of ``repeat`` processes each) while that server runs,
which answers every one of them for the CLI, and again once it has stopped (each command does
all its work in its own process). The flat ``*_s`` keys are the headline figures."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from owlclaw.bench import free_port
from owlclaw.bench.processes import timed_owlclaw
from owlclaw.child_process import stop
from owlclaw.client import ServerClient, ServerUnavailable
from owlclaw.config import OwlClawConfig, ServerConfig
from owlclaw.database import Database

AGENT = "bench-cli"
QUERY = "a queue over many tickets needed a team ping"
MEMORIES = 6
STEPS: list[dict[str, Any]] = [
    *(
        {
            "tool_calls": [
                {
                    "name": "remember",
                    "arguments": {"content": f"Lesson {i}: a queue over {10 + i} tickets needed a"
                                  " team ping.", "tags": ["queue"]},
                }
            ]
        }
        for i in range(MEMORIES)
    ),
    *(
        {
            "tool_calls": [
                {
                    "name": "log_decision",
                    "arguments": {"reasoning": f"check {i}", "decision_type": "other"},
                }
            ]
        }
        for i in range(3)
    ),
    {"content": "Remembered the queue's lessons."},
]  # fmt: skip
"""The recorded run: ten model responses, so ten steps."""

READS: dict[str, list[str]] = {
    "status": ["status"],
    "ledger": ["ledger", AGENT],
    "runs": ["runs", AGENT],
    "schedules": ["schedules"],
    "approvals": ["approvals"],
    "memory": ["memory", AGENT],
    "explain": ["explain", AGENT, "1"],
}
"""The reading commands timed (each with ``--json``)."""
RECALL = ["memory", AGENT, "--recall", QUERY]
VERIFY = ["replay", AGENT, "1", "--verify"]
SERVER_START_TIMEOUT_S = 600.0


def write_app(root: Path) -> Path:
    """The bench agent's app: a scripted model playing ``STEPS``."""
    app = root / AGENT
    (app / "scripts").mkdir(parents=True)
    (app / "owlclaw.toml").write_text(
        f'[agent]\nid = "{AGENT}"\nmodels = ["scripted/{AGENT}"]\nheartbeat_s = 0\n',
        encoding="utf-8",
    )
    (app / "scripts" / f"{AGENT}.json").write_text(json.dumps({"steps": STEPS}), "utf-8")
    (app / "SOUL.md").write_text("You keep a support queue moving.\n", encoding="utf-8")
    (app / "IDENTITY.md").write_text(f"# {AGENT}\n", encoding="utf-8")
    return app


def _median_s(args: list[str], env: dict[str, str], repeat: int) -> tuple[float, Any]:
    """The median seconds of ``repeat`` runs of ``owlclaw ARGS --json``, and its last answer."""
    samples, printed = [], ""
    for _ in range(repeat):
        elapsed, printed = timed_owlclaw([*args, "--json"], env)
        samples.append(elapsed)
    return round(statistics.median(samples), 3), msgspec.json.decode(printed)


def _phase(env: dict[str, str], repeat: int) -> dict[str, float]:
    """Each command's median seconds; checks that recall and verify answered."""
    figures = {name: _median_s(args, env, repeat)[0] for name, args in READS.items()}
    figures["recall"], recalled = _median_s(RECALL, env, repeat)
    if len(recalled["recall"]["memories"]) < 1:
        raise RuntimeError(f"memory --recall found nothing: {recalled}")
    figures["verify"], verified = _median_s(VERIFY, env, repeat)
    if not verified["verify"]["matched"]:
        raise RuntimeError(f"replay --verify did not match: {verified['verify']}")
    return figures


def _start_server(
    app: Path, env: dict[str, str], config: OwlClawConfig, log: Path
) -> subprocess.Popen[bytes]:
    """``owlclaw run APP`` in the background, once it is ready (its output in ``log``);
    RuntimeError with the end of that output when it exits or does not get ready."""
    with log.open("w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "owlclaw", "run", str(app)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    with ServerClient(config) as client:
        while server.poll() is None and time.monotonic() < deadline:
            try:
                client.wait_ready(1.0)
                return server
            except ServerUnavailable:
                continue
    stop_server(server)
    raise RuntimeError(f"owlclaw run did not serve: {log.read_text()[-2000:]}")


def served_env(db: Database, data_dir: Path, port: int) -> dict[str, str]:
    """The environment of ``owlclaw run`` (local placement) on ``db`` and of the CLI asking it."""
    return {
        **os.environ,
        "OWLCLAW_DATABASE_URL": db.url,
        "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
        "OWLCLAW_DATA_DIR": str(data_dir),
        "OWLCLAW_SERVER_PORT": str(port),
        "OWLCLAW_PLACEMENT": "local",
    }


def stop_server(server: subprocess.Popen[Any]) -> None:
    """SIGTERM, as an operator stops it (so it stops the PostgreSQL it started); killed only if
    it does not exit."""
    stop(server, 120)


def run(
    db: Database, repeat: int = 5, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        port = free_port()
        env = served_env(db, root / "data", port)
        config = OwlClawConfig(data_dir=str(root / "data"), server=ServerConfig(port=port))
        app = write_app(root)
        progress("starting owlclaw run…")
        server = _start_server(app, env, config, root / "run.log")
        try:
            with ServerClient(config) as client:
                progress("recording the 10-step run…")
                client.submit(AGENT, None, {}, wait=True)
            progress("timing commands with the server running…")
            served = _phase(env, repeat)
        finally:
            stop_server(server)
        progress("timing commands without a server…")
        alone = _phase(env, repeat)
    reads = list(READS)
    return {
        "method": (
            f"each command `owlclaw CMD --json` in a new process, median of {repeat}; an agent"
            f" with one {len(STEPS)}-step run and {MEMORIES} memories; served: while `owlclaw"
            " run` (local placement) serves it, which answers each of them; alone: no"
            f" server listening. Reading commands: {', '.join(reads)}"
        ),
        "slowest_read_served_s": max(served[name] for name in reads),
        "recall_served_s": served["recall"],
        "verify_served_s": served["verify"],
        "slowest_read_alone_s": max(alone[name] for name in reads),
        "recall_alone_s": alone["recall"],
        "verify_alone_s": alone["verify"],
        **{f"{name}_served_s": served[name] for name in reads},
        **{f"{name}_alone_s": alone[name] for name in reads},
    }
