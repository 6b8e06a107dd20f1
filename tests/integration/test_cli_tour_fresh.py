"""The README's tour typed at once into a new, empty directory: ``owlclaw run APP &`` and, without
waiting for it, ``owlclaw trigger APP``. The trigger waits for the server to be ready and then
uses the token the server wrote meanwhile (it read the token before, found none and was refused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from owlclaw.bench import free_port
from tests.cli import owlclaw, stop_run, user_env

pytestmark = [pytest.mark.integration]


def test_run_then_trigger_at_once_in_an_empty_directory(tmp_path: Path) -> None:
    home = tmp_path / "new-user"
    home.mkdir()
    # local placement: the server starts without Ray; what is tested is the CLI's wait and token
    env = user_env(home / ".owlclaw", free_port(), OWLCLAW_PLACEMENT="local")
    made = owlclaw(env, "init", "my-agent", cwd=home)
    assert made.returncode == 0, made.stderr
    assert not (home / ".owlclaw" / "server.token").exists()
    with (home / "run.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "owlclaw", "run", "my-agent"],
            env=env,
            cwd=home,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        triggered = owlclaw(
            env, "trigger", "my-agent", "--wait-ready", "300", cwd=home, timeout=600
        )
    finally:
        stop_run(server)
    assert triggered.returncode == 0, triggered.stderr + (home / "run.log").read_text()[-3000:]
    assert "waiting up to 300 s" in triggered.stderr  # it did start before the server was ready
    assert "completed:" in triggered.stdout
