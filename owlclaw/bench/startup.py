"""``owlclaw bench startup``: seconds from ``owlclaw run`` to serving, per placement.

Each start is a new ``owlclaw run`` process of a scaffolded app (the template of ``owlclaw
init``), with its own data directory, embedded PostgreSQL and loopback port, as a user's first
command after ``init`` (the first start of a data directory also creates the PostgreSQL cluster:
it is reported apart, as ``*_first_start_s``, stopped as soon as it serves: ``*_stop_at_serving_s``;
the medians are over the starts after it). Serving means ``GET /status`` answers with every
supervised worker running. The server's own per-phase timings are read from that answer (its
``startup`` field); ``*_loaded_s`` is until its background loads (the embedding model, litellm)
ended, after which it is stopped: ``*_stop_s``, SIGTERM to exit.
With ``imports``, one more start (not timed) runs under ``python -X importtime``, and the heavy
modules imported before the server began serving are listed from that output, cut where the
server says it serves (before its background loads start).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from owlclaw.bench import free_port
from owlclaw.server.startup import HEAVY_MODULES

PLACEMENTS = {
    "local": ("local", "builtin"),
    "ray": ("shared", "builtin"),
    "hatchet": ("local", "hatchet"),
}
"""Reported name: the placement and the timer backend it runs with (``shared``: on Ray's local
cluster, which it starts; ``hatchet``: the locally built Hatchet engine, which it starts)."""
DEFAULT = ("local", "ray")
SERVING_MARKERS = ("starting background loads", "serving ")
"""Lines of the server's output that come right when it serves (the first: this version's,
printed before its background loads start; the second, older versions')."""
TOKEN = "bench-startup-token"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def run(
    *,
    placements: tuple[str, ...] = DEFAULT,
    runs: int = 3,
    imports: bool = True,
    own_data: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Median seconds to serve and to stop over ``runs`` starts of each placement (after a
    first start that creates the data directory), the server's phase timings of the median
    start and, with ``imports``, the heavy modules imported before serving. With ``own_data``
    each placement has a data directory of its own and a first start of its own; else they
    share the first placement's (the later ones then start on an existing database, as every
    timed start does)."""
    unknown = [p for p in placements if p not in PLACEMENTS]
    if unknown:
        raise ValueError(f"unknown placement {unknown[0]!r}: one of {', '.join(PLACEMENTS)}")
    result: dict[str, Any] = {"runs": runs}
    with contextlib.ExitStack() as homes:
        home = None
        for name in placements:
            first = None
            if home is None or own_data:
                prefix = f"owlclaw-bench-startup-{name}-"
                home = Path(homes.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
                progress(f"{name}: first start (creates the database), stopped as it serves")
                first = start_once(home, *PLACEMENTS[name], imports=False, loaded=False)
            starts = []
            for n in range(runs):
                progress(f"{name}: start {n + 1}/{runs}")
                starts.append(start_once(home, *PLACEMENTS[name], imports=False))
            traced = None
            if imports:  # apart: -X importtime slows the imports it times
                progress(f"{name}: a start under -X importtime")
                traced = start_once(home, *PLACEMENTS[name], imports=True, loaded=False)
            result.update(summary(name, first, starts, traced))
    return result


def summary(
    name: str,
    first: dict[str, Any] | None,
    starts: list[dict[str, Any]],
    traced: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The flat figures of one placement: medians, the first start, the median start's phases,
    and the heavy imports (the server's word, else the start under ``-X importtime``)."""
    serving = [s["serving_s"] for s in starts]
    median_start = sorted(starts, key=lambda s: s["serving_s"])[len(starts) // 2]
    figures: dict[str, Any] = {
        f"{name}_serving_s": round(statistics.median(serving), 2),
        f"{name}_serving_min_s": round(min(serving), 2),
        f"{name}_serving_max_s": round(max(serving), 2),
        f"{name}_stop_s": round(statistics.median(s["stop_s"] for s in starts), 2),
    }
    if first is not None:
        figures[f"{name}_first_start_s"] = round(first["serving_s"], 2)
        figures[f"{name}_stop_at_serving_s"] = round(first["stop_s"], 2)
    loaded = [s["loaded_s"] for s in starts if s["loaded_s"] is not None]
    if loaded:
        figures[f"{name}_loaded_s"] = round(statistics.median(loaded), 2)
    for load, seconds in median_start["background_s"].items():
        figures[f"{name}_background_{load}_s"] = seconds
    for phase, seconds in median_start["phases"].items():
        figures[f"{name}_phase_{phase}_s"] = seconds
    imported = median_start["imported_before_serving"]
    if traced is not None:
        figures[f"{name}_heavy_import_s"] = traced["import_s"]
        if imported is None:
            imported = traced["imported_before_serving"]
    figures[f"{name}_imported_before_serving"] = imported
    return figures


def start_once(
    home: Path, placement: str, timers: str = "builtin", *, imports: bool, loaded: bool = True
) -> dict[str, Any]:
    """One ``owlclaw run`` from its start to its exit: seconds to serve, to have loaded in the
    background what a recall and a model call need (if ``loaded``; else it is stopped as soon
    as it serves) and to stop; the server's phases, and what it imported before serving."""
    app = home / "bench-agent"
    port = free_port()
    env = server_env(home / "data", port) | {"OWLCLAW_TIMER_BACKEND": timers}
    if not app.exists():  # as a user makes it
        made = subprocess.run(
            [sys.executable, "-m", "owlclaw", "init", str(app)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=START_TIMEOUT_S,
        )
        if made.returncode != 0:
            raise RuntimeError(f"owlclaw init failed: {made.stderr}")
    command = [sys.executable, *(["-X", "importtime"] if imports else []), "-m", "owlclaw"]
    began = time.monotonic()
    server = subprocess.Popen(
        [*command, "run", str(app), "--placement", placement],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert server.stdout is not None
    output = Output(server.stdout, began)
    try:
        status = wait_serving(server, port, output)
        serving_s = time.monotonic() - began
        loaded_s = None
        if loaded and "startup" in status:  # a server that says when its loads end
            status = wait_loaded(port, placement, status)
            loaded_s = time.monotonic() - began
        stopped = time.monotonic()
        server.send_signal(signal.SIGTERM)
        server.wait(STOP_TIMEOUT_S)
        stop_s = time.monotonic() - stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        output.join()
    startup = status.get("startup", {})
    measured: dict[str, Any] = {
        "serving_s": serving_s,
        "loaded_s": loaded_s,
        "stop_s": stop_s,
        "phases": startup.get("phases") or output.phases(serving_s),
        "background_s": startup.get("background_s", {}),
        "imported_before_serving": startup.get("imported_before_serving"),
    }
    if imports:
        import_s = heavy_imports(output.text())
        measured["import_s"] = import_s
        if measured["imported_before_serving"] is None:  # a server that does not say
            measured["imported_before_serving"] = sorted(import_s)
    return measured


class Output:
    """The server's output, each line with the second it arrived: the progress lines (``starting
    <part>…``) time the phases of a server that does not report them itself."""

    def __init__(self, stream: IO[bytes], began: float):
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(stream, began), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes], began: float) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append((time.monotonic() - began, line))

    def join(self) -> None:
        self._thread.join(STOP_TIMEOUT_S)

    def text(self) -> str:
        return "\n".join(line for _, line in list(self.lines))

    def phases(self, serving_s: float) -> dict[str, float]:
        """Seconds from the launch to the first progress line (``process``), and from each
        progress line to the next, the last one to serving."""
        marks: list[tuple[float, str]] = []
        for at, line in list(self.lines):
            if any(marker in line for marker in SERVING_MARKERS):
                serving_s = min(serving_s, at)
                break
            if line.startswith("starting "):
                part = re.split(r" \(|…|\.\.\.", line.removeprefix("starting "))[0]
                marks.append((at, re.sub(r"[^a-z0-9]+", "_", part.strip().lower())))
        if not marks:
            return {}
        phases = {"process": round(marks[0][0], 3)}
        ends = [at for at, _ in marks[1:]] + [serving_s]
        for (at, part), end in zip(marks, ends, strict=True):
            phases[part] = round(end - at, 3)
        return phases


def server_env(data_dir: Path, port: int) -> dict[str, str]:
    """A user's environment with its own data directory, port and token (other ``OWLCLAW_``
    settings left out, but for where the engine binaries are)."""
    kept = ("OWLCLAW_HATCHET_BIN", "OWLCLAW_MCP_BIN")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWLCLAW_") or k in kept}
    return env | {
        "OWLCLAW_DATA_DIR": str(data_dir),
        "OWLCLAW_SERVER_PORT": str(port),
        "OWLCLAW_SERVER_TOKEN": TOKEN,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
    }


def wait_serving(server: subprocess.Popen[bytes], port: int, output: Output) -> dict[str, Any]:
    """Poll ``/status`` until it answers with every worker running; its answer."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"owlclaw run exited ({server.returncode}): {output.text()}")
        status = get_status(port)
        workers = status.get("workers", []) if status is not None else []
        if (
            status is not None
            and workers
            and all(w["state"] in ("running", "done") for w in workers)
        ):
            return status
        time.sleep(0.05)
    raise TimeoutError(f"owlclaw run did not serve in {START_TIMEOUT_S} s: {output.text()}")


def wait_loaded(port: int, placement: str, status: dict[str, Any]) -> dict[str, Any]:
    """Poll ``/status`` until the server's background loads ended (the embedding model; litellm
    too with local placement: Ray's hosts import it in their own processes)."""
    loads = {"embedding_model"} | ({"litellm"} if placement == "local" else set())
    deadline = time.monotonic() + START_TIMEOUT_S
    while not loads <= set(status["startup"]["background_s"]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the background loads did not end in {START_TIMEOUT_S} s")
        time.sleep(0.05)
        status = get_status(port) or status
    return status


def get_status(port: int) -> dict[str, Any] | None:
    """The server's ``/status``, None while it does not answer it."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/status", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status: dict[str, Any] = json.load(response)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return status


def heavy_imports(output: str) -> dict[str, float]:
    """Seconds (cumulative, as ``-X importtime`` reports them) of each heavy top-level module
    imported before the server's serving line."""
    found: dict[str, float] = {}
    for line in output.splitlines():
        if any(marker in line for marker in SERVING_MARKERS):
            break
        match = IMPORT_LINE.match(line)
        if match is None:
            continue
        module = match.group(4)
        if module in HEAVY_MODULES:
            found[module] = round(int(match.group(2)) / 1e6, 2)
    return found
