"""An app's handlers.py, imported with a time limit.

An import that never returns (a loop, a network call at import time) cannot be interrupted
inside the process: the thread running it is stuck for good and wedges its agent. So the code is
first executed in a short-lived child process given ``timeout_s`` (it dumps where it was and
exits when the time is up, and is killed with its process group if it does not); only source
that loaded there is imported here — the very text the child ran. A failure (raised, hung, the
child exited) is an ``AppCodeError`` naming the file and the cause, remembered for that source,
so the runs of a broken app fail at once; a changed file is probed afresh.

handlers.py therefore executes twice per change (child, then here): keep import-time side
effects out of it.
"""

from __future__ import annotations

import faulthandler
import hashlib
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import suppress
from pathlib import Path
from typing import IO

from owlclaw.app import AppError
from owlclaw.tools.capabilities import Registry, load_registry

DETAILS_CHARS = 4000
"""How much of the child's traceback (its last characters) an error keeps."""
EXIT_GRACE_S = 2.0
"""Time the child gets beyond the limit to report where it hung before it is killed."""
STARTUP_S = 60.0
"""Time the child's interpreter gets to start before the limit applies: its start-up is not the
app's import, and on a loaded machine it alone can take longer than a short limit."""
READY = b"R"
"""The child's first byte: it has started and now imports the app's code."""
LOADED = "loaded "
"""The child's answer when the code loaded a registry, followed by its capabilities' names
(JSON), so that start-up can check them without importing the code."""
FAILED = 3
TIMEOUT_DUMP = re.compile(r"^Timeout \(\d+:\d\d:\d\d(\.\d+)?\)!$", re.MULTILINE)
"""The first line faulthandler writes when ``dump_traceback_later`` ends the process."""
"""The child's exit code when the import raised; its answer is the error."""

log = logging.getLogger(__name__)


class AppCodeError(AppError):
    """handlers.py did not load; the message names the file and the cause, ``details`` holds
    the end of the traceback (where it raised, or where it was when the time was up)."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


class AppCode:
    """Loads one agent's handlers.py: probed in a child process first, then imported."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._failed: tuple[str, AppCodeError] | None = None
        """(sha256 of the source, its error): the last source that did not load."""

    def load(self, path: Path) -> Registry:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise AppCodeError(f"{path} cannot be read: {e}") from e
        sha = hashlib.sha256(source.encode()).hexdigest()
        if self._failed is not None and self._failed[0] == sha:
            raise self._failed[1]
        try:
            began = time.perf_counter()
            probe(path, source, self.timeout_s)
            log.info("probed %s in %.0f ms", path, (time.perf_counter() - began) * 1000)
            return load_registry(path, source)
        except AppCodeError as e:
            self._failed = (sha, e)
            raise
        except AppError as e:  # loaded in the child, not here
            self._failed = (sha, AppCodeError(str(e), _tail(traceback.format_exc())))
            raise self._failed[1] from e


def probe(path: Path, source: str, timeout_s: float) -> list[str]:
    """Execute ``source`` as ``path`` in a child process; the names of the capabilities it
    registers, or AppCodeError unless it loads a registry within ``timeout_s``. Nothing the
    child started outlives the call."""
    package_root = str(Path(__file__).resolve().parents[2])  # the code running here
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    }
    command = [sys.executable, "-m", __name__, str(path), repr(timeout_s)]
    with tempfile.TemporaryFile() as errors, tempfile.TemporaryFile() as given:
        given.write(source.encode())
        given.seek(0)
        child = subprocess.Popen(
            command,
            stdin=given,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            start_new_session=True,
        )
        assert child.stdout is not None
        try:
            began = time.monotonic()
            answer, ended = _read(child.stdout, STARTUP_S, until=READY)
            if answer.startswith(READY):
                began = time.monotonic()
                rest, ended = _read(child.stdout, timeout_s + EXIT_GRACE_S)
                answer += rest
            if ended:  # it closed its answer and is exiting: its exit code tells how it ended
                with suppress(subprocess.TimeoutExpired):
                    child.wait(EXIT_GRACE_S)
        finally:
            _kill_group(child.pid)  # whatever the import started goes with it
            child.wait()
        size = errors.seek(0, os.SEEK_END)
        errors.seek(max(0, size - 4 * DETAILS_CHARS))
        details = _tail(errors.read().decode(errors="replace"))
    message = answer.removeprefix(READY).decode(errors="replace").strip()
    if child.returncode == 0 and message.startswith(LOADED.strip()):
        names: list[str] = json.loads(message.removeprefix(LOADED.strip()) or "[]")
        return names
    if child.returncode == FAILED and message:
        raise AppCodeError(message, details)
    if time.monotonic() - began >= timeout_s or _timed_out(child.returncode, details):
        raise AppCodeError(
            f"{path} did not finish importing within {timeout_s:g} s"
            f" (runtime.app_load_timeout_s){_where(path, details)}",
            details,
        )
    raise AppCodeError(
        f"{path}: importing it ended the process (exit code {child.returncode})", details
    )


def _read(pipe: IO[bytes], timeout_s: float, until: bytes | None = None) -> tuple[bytes, bool]:
    """What the child writes to ``pipe`` within ``timeout_s``, up to ``until`` if given; and
    whether it closed the pipe."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while (remaining := deadline - time.monotonic()) > 0:
        if not select.select([pipe], [], [], remaining)[0]:
            break
        chunk = os.read(pipe.fileno(), 65536)
        if not chunk:
            return data, True
        data += chunk
        if until is not None and data.startswith(until):
            break
    return data, False


def _kill_group(pgid: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _timed_out(returncode: int | None, details: str) -> bool:
    """The child's own timer ended it: faulthandler dumped its stacks and exited with 1. Told
    apart by that, not by the clock alone: the parent's clock starts when it reads READY, which
    under load can be later than the child's timer started."""
    return returncode == 1 and TIMEOUT_DUMP.search(details) is not None


def _where(path: Path, dump: str) -> str:
    """The line of ``path`` the dumped stack was in (innermost first), if it shows one."""
    match = re.search(rf'File "{re.escape(str(path))}", line (\d+)', dump)
    return f"; it was at line {match.group(1)}" if match else ""


def _tail(text: str) -> str:
    return text if len(text) <= DETAILS_CHARS else "…" + text[-DETAILS_CHARS:]


def _child(path: Path, timeout_s: float) -> None:
    """The probe's side: the answer goes to the original stdout, whatever the import prints to
    stderr; past the limit, faulthandler dumps every thread's stack and exits. It exits at once
    after answering, so threads the import started do not keep it alive."""
    source = sys.stdin.buffer.read().decode()
    with os.fdopen(os.dup(1), "w", encoding="utf-8") as answer:
        os.dup2(2, 1)
        answer.write(READY.decode())
        answer.flush()
        faulthandler.dump_traceback_later(timeout_s, exit=True)
        code = 0
        try:
            registry = load_registry(path, source)
            answer.write(LOADED + json.dumps(sorted(registry.capabilities)))
        except BaseException as e:  # SystemExit, KeyboardInterrupt: still an answer
            traceback.print_exc()
            answer.write(str(e) if isinstance(e, AppError) else f"{path}: {type(e).__name__}: {e}")
            code = FAILED
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), float(sys.argv[2]))
