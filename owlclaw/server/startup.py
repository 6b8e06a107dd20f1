"""Where a server's start-up time went: seconds per phase, for ``/status`` and ``owlclaw bench
startup``.

The first phase, ``process``, is from the process's creation (as the kernel records it) to the
service's start: the interpreter, the imports, the apps' validation and the webhook's set-up.
Each next phase ends where the one after it begins (Ray's start runs beside PostgreSQL's, so the
``postgresql`` phase is what is left of that after Ray's); the background loads started at
serving are timed apart, as they end.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import psutil

HEAVY_MODULES = (
    "litellm",
    "torch",
    "sentence_transformers",
    "onnxruntime",
    "transformers",
    "mcp",
    "a2a",
    "hatchet_sdk",
    "ray",
    "bs4",
)
"""Modules that take a tenth of a second to seconds to import, each imported where it is first
needed (bs4 when web_fetch first reads a page)."""


def process_age_s() -> float:
    """Seconds since this process was created, to the kernel's clock tick on Linux (psutil's
    creation time is rounded to the boot time's whole second)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError, IndexError):
        return time.time() - psutil.Process().create_time()


def heavy_imported() -> list[str]:
    """The heavy modules this process has imported."""
    return [name for name in HEAVY_MODULES if name in sys.modules]


class StartupTimes:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.background: dict[str, float] = {}
        """Seconds each background load took, once it ended."""
        self.imported_before_serving: list[str] | None = None
        self._phase: str | None = None
        self._began = time.time()

    def begin(self, phase: str) -> None:
        """End the current phase (the first: ``process``) and begin ``phase``."""
        now = time.time()
        if self._phase is not None:
            self.phases[self._phase] = round(now - self._began, 3)
        elif not self.phases:
            self.phases["process"] = round(process_age_s(), 3)
        self._phase, self._began = phase, now

    def serving(self) -> None:
        """The last phase ended: the server serves; which heavy modules it imported so far."""
        self.begin("serving")
        self._phase = None
        self.imported_before_serving = heavy_imported()

    def time_background(self, name: str, loading: Future[Any]) -> None:
        """Record how long ``loading`` (started now) takes, when it ends."""
        began = time.time()

        def ended(_: Future[Any]) -> None:
            self.background[name] = round(time.time() - began, 3)

        loading.add_done_callback(ended)

    def report(self) -> dict[str, Any]:
        return {
            "phases": dict(self.phases),
            "background_s": dict(self.background),
            "imported_before_serving": self.imported_before_serving,
        }
