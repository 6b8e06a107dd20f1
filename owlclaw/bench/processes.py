"""``owlclaw`` run as a user runs it, for the benches that time a command: a new process, its
imports and start-up included."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence


def timed_owlclaw(
    args: Sequence[str], env: Mapping[str, str], timeout_s: float = 300
) -> tuple[float, str]:
    """Seconds ``owlclaw ARGS`` took in a new process, and what it printed on stdout;
    RuntimeError with its error output when it fails."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "owlclaw", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"owlclaw {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout
