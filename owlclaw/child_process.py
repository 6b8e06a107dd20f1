"""Stopping a child process as an operator does: SIGTERM, then SIGKILL when it has not exited in
time. A child that hangs in its own shutdown (a Hatchet worker whose listener died did) must not
outlive the stop of the process that started it."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], timeout_s: float) -> bool:
    """SIGTERM ``process`` and wait up to ``timeout_s``, then kill it; True if it exited on the
    SIGTERM (or had already exited)."""
    if process.poll() is not None:
        return True
    process.terminate()
    try:
        process.wait(timeout_s)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
