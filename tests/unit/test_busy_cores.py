"""busy_cores: burner processes that keep cores busy for a bench and never outlive it."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from owlclaw.bench.burners import busy_cores

WAIT_S = 60.0
"""How long a test waits for what it expects (a bound, never a measured figure)."""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(condition: object) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def test_burners_use_cpu_and_are_gone_after_the_block() -> None:
    with busy_cores(2) as burners:
        pids = [b.pid for b in burners]
        assert len(set(pids)) == 2
        for pid in pids:
            start = cpu_s(pid)
            assert wait_until(lambda pid=pid, start=start: cpu_s(pid) > start + 0.3)
    assert all(gone(pid) for pid in pids)


def test_no_cores_starts_nothing() -> None:
    with busy_cores(0) as burners:
        assert burners == []


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="number of cores"), busy_cores(-1):
        pass


def test_a_burner_ends_itself_after_its_limit() -> None:
    with busy_cores(1, limit_s=0.2) as burners:
        assert burners[0].wait(timeout=WAIT_S) == 0


def test_a_burner_ends_when_its_parent_dies() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from owlclaw.bench.burners import busy_cores\n"
            "with busy_cores(1) as b:\n"
            "    print(b[0].pid, flush=True)\n"
            "    time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert not gone(pid)
    parent.kill()
    parent.wait()
    assert wait_until(lambda: gone(pid))
