"""``owlclaw blob``: a stored blob's bytes to stdout or a file; an unknown or altered one is one
clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from events import Ledger
from owlclaw.cli import app
from owlclaw.cli import blob as blob_cli

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels"


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    with Ledger.in_memory() as led:

        @contextmanager
        def open_ledger() -> Iterator[tuple[Any, Ledger]]:
            yield None, led

        monkeypatch.setattr(blob_cli, "open_ledger", open_ledger)
        yield led


def test_a_blob_is_written_to_stdout_or_to_a_file(ledger: Ledger, tmp_path: Path) -> None:
    sha256 = ledger.blobs.put(PNG, "image/png")
    printed = CliRunner().invoke(app, ["blob", sha256])
    assert printed.exit_code == 0 and printed.stdout_bytes == PNG
    target = tmp_path / "image.png"
    written = CliRunner().invoke(app, ["blob", sha256, "--out", str(target)])
    assert written.exit_code == 0, written.output
    assert target.read_bytes() == PNG
    assert f"wrote {len(PNG)} bytes (image/png)" in written.stdout


def test_an_unknown_blob_is_one_line_and_exit_3(ledger: Ledger) -> None:
    missing = hashlib.sha256(b"never stored").hexdigest()
    result = CliRunner().invoke(app, ["blob", missing])
    assert result.exit_code == 3
    assert f"no blob {missing}" in result.stderr and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_altered_blob_is_refused_with_exit_1(ledger: Ledger) -> None:
    forged = hashlib.sha256(PNG).hexdigest()
    ledger.database.recorder.insert_blob(forged, "image/png", b"not the png")
    result = CliRunner().invoke(app, ["blob", forged])
    assert result.exit_code == 1 and result.stdout_bytes == b""
    assert "no longer hash" in result.stderr
