"""Hints print the ``owlclaw`` a user can run from where they are: after ``make demo`` the venv
is not activated, so a bare ``owlclaw`` would not be found."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from owlclaw.cli.common import command_name


def test_a_venv_that_is_not_on_the_path_is_named_by_its_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = Path(sys.executable).with_name("owlclaw")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(script.parents[2])  # the directory that holds .venv
    assert command_name() == str(Path(*script.parts[-3:]))  # ".venv/bin/owlclaw"
    monkeypatch.chdir(tmp_path)
    assert command_name() == str(script)


def test_the_owlclaw_on_the_path_is_named_owlclaw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert command_name() == "owlclaw"
