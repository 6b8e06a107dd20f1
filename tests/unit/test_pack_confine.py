"""Workspace path confinement: no path, however spelled, resolves outside the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.tools.pack.confine import PathEscapeError, confine


def test_relative_path_inside_workspace(tmp_path: Path) -> None:
    assert confine(tmp_path, "notes/a.txt") == tmp_path.resolve() / "notes" / "a.txt"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd"])
def test_escapes_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(PathEscapeError):
        confine(tmp_path / "ws", path)


def test_symlink_pointing_outside_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out").symlink_to(tmp_path)
    with pytest.raises(PathEscapeError):
        confine(ws, "out/secret")


_segment = st.sampled_from(["..", ".", "a", "b", "/", "link"])


@settings(max_examples=200)
@given(parts=st.lists(_segment, max_size=8))
def test_no_generated_path_escapes(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    base = tmp_path_factory.mktemp("c")
    ws = base / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "link").symlink_to(base)
    try:
        target = confine(ws, "/".join(parts))
    except PathEscapeError:
        return
    assert target.is_relative_to(ws.resolve())
