"""handlers.py imported with a time limit: a probe in a child process first, so code that
hangs or raises at import is an error naming the file and the cause, and nothing is left
running; the same broken source fails again at once, a fixed one loads."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psutil
import pytest

from owlclaw.runtime import app_code
from owlclaw.runtime.app_code import EXIT_GRACE_S, STARTUP_S, AppCode, AppCodeError

HEADER = "from owlclaw import Registry\nregistry = Registry()\n"
FIXED = HEADER + '@registry.capability("Check entries.")\ndef entry_check(symbol: str) -> str:\n'
FIXED += "    return symbol\n"


def probes_running() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "owlclaw.runtime.app_code" in " ".join(p.cmdline())
    ]


def test_code_that_never_finishes_importing_fails_within_the_limit_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handlers = tmp_path / "handlers.py"
    handlers.write_text(HEADER + "while True: pass\n")  # one line: the dump shows it
    code = AppCode(timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(AppCodeError) as caught:
        code.load(handlers)
    assert time.monotonic() - began < STARTUP_S + 1.0 + EXIT_GRACE_S  # bounded, never wedged
    assert re.fullmatch(
        rf"{re.escape(str(handlers))} did not finish importing within 1 s .*; it was at line 3",
        str(caught.value),
    )
    assert f'File "{handlers}", line 3' in caught.value.details
    assert probes_running() == []
    with monkeypatch.context() as no_probe:
        no_probe.setattr(app_code, "probe", refuse_to_probe)
        with pytest.raises(AppCodeError) as again:  # the same source: its error, no second probe
            code.load(handlers)
    assert str(again.value) == str(caught.value)
    handlers.write_text(FIXED)
    code.timeout_s = 60.0  # the fixed code loads in a limit a loaded machine meets
    assert list(code.load(handlers).capabilities) == ["entry_check"]


def refuse_to_probe(path: Path, source: str, timeout_s: float) -> None:
    raise AssertionError(f"{path} probed again")


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        ("raise RuntimeError('no market data')", " failed to import: RuntimeError: no market data"),
        ("import sys; sys.exit(2)", ": SystemExit: 2"),
        ("import os; os._exit(0)", ": importing it ended the process (exit code 0)"),
        # exit code 1 is also how the child's own timer ends it: without its dump, not a timeout
        ("import os; os._exit(1)", ": importing it ended the process (exit code 1)"),
        ("registry = None", " defines no `registry = Registry()`"),
    ],
)
def test_code_that_raises_or_exits_at_import_is_an_error_naming_the_file(
    tmp_path: Path, statement: str, error: str
) -> None:
    handlers = tmp_path / "handlers.py"
    handlers.write_text(HEADER + statement + "\n")
    with pytest.raises(AppCodeError, match=re.escape(f"{handlers}{error}")) as caught:
        AppCode(timeout_s=5.0).load(handlers)
    if "raise" in statement:
        assert f'File "{handlers}", line 3, in <module>' in caught.value.details
    assert probes_running() == []
