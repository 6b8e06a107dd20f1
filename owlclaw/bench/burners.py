"""Background load for benches: processes that each keep one core busy, to measure on a machine
made slower (timer lateness on a starved machine, issue 40).

A burner is a tight Python loop in its own process. It ends itself after ``limit_s`` or as soon
as its parent is gone, so a bench killed without cleanup leaves no core burning. The parent's
pid is its argument: read in the burner, a parent killed before it starts would be init's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

LIMIT_S = 3600.0
"""A burner's longest life, whatever happens to its parent."""
STOP_S = 10.0

_BURN = """
import os, sys, time
parent, end = int(sys.argv[2]), time.monotonic() + float(sys.argv[1])
n = 0
while True:
    n += 1
    if n % 200_000 == 0 and (time.monotonic() > end or os.getppid() != parent):
        break
"""


@contextmanager
def busy_cores(n: int, limit_s: float = LIMIT_S) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` burner processes for the block's duration (none when ``n`` is 0); each stops on
    exit, and on its own after ``limit_s`` or once this process is gone."""
    if n < 0:
        raise ValueError(f"busy_cores needs a number of cores >= 0, not {n}")
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            burners.append(
                subprocess.Popen(
                    [sys.executable, "-I", "-c", _BURN, str(limit_s), str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        yield burners
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            try:
                burner.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                burner.kill()
                burner.wait()
