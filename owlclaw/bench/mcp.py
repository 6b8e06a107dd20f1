"""``owlclaw bench mcp``: what a tool call to an MCP server costs over a built-in one.

Runs of one agent play a scripted model at zero latency, each making ``TOOL_STEPS`` calls of one
tool: the built-in ``log_decision``, then server-everything's ``echo`` over stdio, then over
streamable HTTP (a loopback server started here). A step is the gap between one model call
ending and the next one starting, read from the recorded LLMResponded events as in ``bench
runtime``: the whole pipeline (parse, govern, write-ahead commit, call, record). The overhead is
each MCP step's p50/p95 minus the built-in's. All runs share one host's MCP connections, as on a
host; the first run of each kind (connecting, warming up) is not counted.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from events import Ledger
from events import catalog as ev
from owlclaw.bench import percentiles
from owlclaw.llm.scripted import register_script
from owlclaw.mcp.pool import McpPool
from owlclaw.runtime.agent_runtime import AgentRuntime

TOOL_STEPS = 10
EVERYTHING = "mcp-server-everything"
LISTEN_S = 30.0
KINDS = {
    "builtin": ("log_decision", {"reasoning": "step {i}", "decision_type": "other"}),
    "stdio": ("stdio__echo", {"message": "step {i}"}),
    "http": ("http__echo", {"message": "step {i}"}),
}
"""The tool of each kind, with its arguments (``{i}``: the step, so no two calls repeat)."""


def run(url: str, servers_bin: Path, runs: int = 30) -> dict[str, Any]:
    launcher = servers_bin / EVERYTHING
    if not launcher.exists():
        raise FileNotFoundError(f"no {launcher}: run `make mcp-servers` (needs Node.js)")
    with tempfile.TemporaryDirectory() as tmp, http_server(launcher) as endpoint:
        app = Path(tmp) / "bench-mcp"
        app.mkdir()
        (app / "SOUL.md").write_text("A benchmark.")
        (app / "IDENTITY.md").write_text("A benchmark.")
        (app / "owlclaw.toml").write_text(
            f'[mcp.servers.stdio]\ncommand = "{launcher}"\nargs = ["stdio"]\n\n'
            f'[mcp.servers.http]\nurl = "{endpoint}"\n'
        )
        with Ledger(url) as ledger:
            steps = asyncio.run(_steps(ledger, app, runs))
    builtin = percentiles(steps["builtin"])
    result: dict[str, Any] = {"runs_per_kind": runs, "tool_steps_per_run": TOOL_STEPS}
    for kind, samples in steps.items():
        figures = percentiles(samples)
        result[f"{kind}_tool_step"] = figures
        if kind != "builtin":
            result[f"{kind}_overhead_over_builtin_ms"] = {
                q: round(figures[q] - builtin[q], 2) for q in ("p50_ms", "p95_ms")
            }
    return result


async def _steps(ledger: Ledger, app: Path, runs: int) -> dict[str, list[float]]:
    pool = McpPool()
    steps: dict[str, list[float]] = {}
    try:
        for kind, (tool, arguments) in KINDS.items():
            script = f"bench-mcp-{kind}"
            calls = [
                {"tool_calls": [{"name": tool, "arguments": _nth(arguments, i)}]}
                for i in range(TOOL_STEPS)
            ]
            register_script(script, [*calls, {"content": "done"}])
            runtime = AgentRuntime(
                ledger,
                f"bench-mcp-{kind}-{uuid.uuid4().hex[:6]}",
                models=[f"scripted/{script}"],
                app_dir=app,
                mcp=pool,
            )
            try:
                await runtime.run("webhook")  # connects, warms up: not counted
                run_ids = [(await runtime.run("webhook")).run_id for _ in range(runs)]
            finally:
                runtime.close()
            steps[kind] = [gap for run_id in run_ids for gap in _gaps(ledger, run_id, tool)]
    finally:
        await pool.close()
    return steps


def _nth(arguments: dict[str, str], i: int) -> dict[str, str]:
    return {k: v.format(i=i) for k, v in arguments.items()}


def _gaps(ledger: Ledger, run_id: str, tool: str) -> list[float]:
    """The tool steps of a run, in ms; a run whose calls did not all succeed is an error."""
    events = ledger.stream(uuid.UUID(run_id))
    succeeded = [e for e in events if isinstance(e, ev.ToolCallSucceeded) and e.tool == tool]
    if len(succeeded) != TOOL_STEPS:
        failed = [e for e in events if isinstance(e, ev.ToolCallFailed | ev.ToolCallRejected)]
        raise RuntimeError(f"run {run_id}: {tool} did not succeed every time: {failed[:1]}")
    responses = [e for e in events if isinstance(e, ev.LLMResponded)]
    gaps = []
    for done, following in pairwise(responses):
        next_request = following.timestamp - timedelta(milliseconds=following.latency_ms)
        gaps.append((next_request - done.timestamp).total_seconds() * 1000)
    return gaps


@contextmanager
def http_server(launcher: Path) -> Iterator[str]:
    """server-everything serving streamable HTTP on a free loopback port, stopped after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [str(launcher), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + LISTEN_S
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server-everything did not listen on port {port}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
