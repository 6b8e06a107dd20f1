"""The machine's load while a bench ran: a figure measured on a busy machine says so beside it.

The 1-minute load average before and after, and the share of all cores' time that was busy over
the bench, from the first (aggregate) ``cpu`` line of ``/proc/stat``: busy is every field but
idle and iowait (guest time is already counted in user and nice, so it is left out)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

PROC_STAT = Path("/proc/stat")


class CpuTimes(msgspec.Struct, frozen=True):
    """Clock ticks since boot over all cores."""

    busy: int
    total: int


class Load(msgspec.Struct, frozen=True):
    load1_before: float
    load1_after: float
    cpu_busy_share: float
    """Busy share of all cores over the bench, 0 to 1."""


def parse_cpu_times(stat: str) -> CpuTimes:
    """The aggregate ``cpu`` line of ``/proc/stat`` text: user nice system idle iowait irq
    softirq steal [guest guest_nice]."""
    for line in stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(f) for f in fields[1:9]]
            idle = ticks[3] + ticks[4]
            return CpuTimes(busy=sum(ticks) - idle, total=sum(ticks))
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def busy_share(before: CpuTimes, after: CpuTimes) -> float:
    elapsed = after.total - before.total
    return round((after.busy - before.busy) / elapsed, 3) if elapsed > 0 else 0.0


class LoadMeter:
    """Started before a bench, read after it."""

    def __init__(self) -> None:
        self.load1 = os.getloadavg()[0]
        self.cpu = parse_cpu_times(PROC_STAT.read_text())

    def read(self) -> Load:
        cpu = parse_cpu_times(PROC_STAT.read_text())
        return Load(
            load1_before=round(self.load1, 2),
            load1_after=round(os.getloadavg()[0], 2),
            cpu_busy_share=busy_share(self.cpu, cpu),
        )
