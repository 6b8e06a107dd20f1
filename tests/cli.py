"""Running ``owlclaw`` as a user does: a subprocess with its own data directory and port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from owlclaw.bench.cli import stop_server
from owlclaw.database import Database


def user_env(data_dir: Path, port: int, **extra: str) -> dict[str, str]:
    """The environment of a user on a fresh machine: embedded default in ``data_dir``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OWLCLAW_", "HATCHET_CLIENT_")) or k == "OWLCLAW_HATCHET_BIN"
    }
    return env | {
        "OWLCLAW_DATA_DIR": str(data_dir),
        "OWLCLAW_SERVER_PORT": str(port),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }


def owlclaw(
    env: dict[str, str], *args: str, cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "owlclaw", *args],
        check=False,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def owlclaw_on(db: Database, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``owlclaw`` on the test's database (the tests' environment otherwise)."""
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": db.url,
        "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
    }
    return owlclaw(env, *args, cwd=cwd, timeout=120)


def start_run(env: dict[str, str], cwd: Path, *apps: str) -> tuple[subprocess.Popen[str], Path]:
    """``owlclaw run APPS`` in the background, its output in ``cwd/run.log``; returns once it
    serves or has exited (the caller asserts which)."""
    from tests.waiting import wait_for

    log = cwd / "run.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", *apps],
        env=env,
        cwd=cwd,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: "serving" in log.read_text() or server.poll() is not None, "serving", 180)
    return server, log


def stop_run(server: subprocess.Popen[Any]) -> None:
    """Stop ``owlclaw run`` as an operator does (SIGTERM), so that it stops the PostgreSQL it
    started; killed only if it does not exit. A killed server leaves that PostgreSQL running."""
    stop_server(server)


def owlclaw_json(env: dict[str, str], *args: str, cwd: Path) -> Any:
    result = owlclaw(env, *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def runs_of(ledger: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """`owlclaw ledger --json` grouped by run stream (the agent stream left out), in order."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in ledger:
        if event["type"] == "RunStarted" or event["stream"] in runs:
            runs.setdefault(event["stream"], []).append(event)
    return runs


def tools_called(run: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["tool"] for e in run if e["type"] == "ToolCallRequested"]
