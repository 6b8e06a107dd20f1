"""A served process ends through ``exit_served``: Python's module teardown is skipped, what the
exit handlers do (stopping the embedded server, flushing logs and traces) is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import atexit, logging, sys
from owlclaw.cli.common import exit_served

atexit.register(lambda: open(sys.argv[1], "w").write("handler ran"))
logging.basicConfig(filename=sys.argv[2], level=logging.INFO)
logging.getLogger("served").info("logged before the exit")
sys.stdout.write("written, never flushed by the program")
exit_served(int(sys.argv[3]))
print("not reached")
"""


def served(tmp_path: Path, code: int) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    handler, log = tmp_path / "handler", tmp_path / "log"
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(handler), str(log), str(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, handler, log


def test_exit_handlers_run_and_buffered_output_is_kept(tmp_path: Path) -> None:
    result, handler, log = served(tmp_path, 0)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "written, never flushed by the program"
    assert handler.read_text() == "handler ran"
    assert "logged before the exit" in log.read_text()


def test_the_exit_code_is_the_one_given(tmp_path: Path) -> None:
    result, handler, _ = served(tmp_path, 3)
    assert result.returncode == 3
    assert handler.read_text() == "handler ran"
