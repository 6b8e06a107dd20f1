"""Stopping a child process: SIGTERM, and SIGKILL for one that does not exit (a Hatchet worker
hung in hatchet-sdk's shutdown outlived ``owlclaw run``'s stop, and its engine with it)."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from owlclaw.child_process import stop
from owlclaw.config import OwlClawConfig
from owlclaw.server import hatchet
from owlclaw.server.hatchet import HatchetParts

SLEEPER = "import signal, time\n{handler}\nprint('ready', flush=True)\ntime.sleep(600)"


def child(*, ignore_sigterm: bool) -> subprocess.Popen[str]:
    handler = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if ignore_sigterm else ""
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER.format(handler=handler)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def test_a_child_that_exits_on_sigterm_is_not_killed() -> None:
    process = child(ignore_sigterm=False)
    assert stop(process, 60) is True
    assert process.returncode == -signal.SIGTERM
    assert stop(process, 60) is True  # already gone: nothing to signal


def test_a_child_that_ignores_sigterm_is_killed_once_the_wait_is_over() -> None:
    process = child(ignore_sigterm=True)
    assert stop(process, 0.5) is False
    assert process.returncode == -signal.SIGKILL


def test_the_service_kills_a_hatchet_worker_that_hangs_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    parts = HatchetParts(OwlClawConfig(data_dir=str(tmp_path)))
    parts.worker = worker = child(ignore_sigterm=True)
    monkeypatch.setattr(hatchet, "WORKER_STOP_S", 0.5)
    with caplog.at_level(logging.WARNING, logger="owlclaw.server.hatchet"):
        asyncio.run(parts.stop_worker())
    assert worker.returncode == -signal.SIGKILL
    assert "did not exit 0.5 s after SIGTERM: killed" in caplog.text
