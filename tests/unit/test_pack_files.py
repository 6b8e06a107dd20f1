"""Workspace file tools: what they do inside the workspace, and every way out refused."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.files import FilesConfig, file_tools
from owlclaw.tools.threads import HandlerThreads
from owlclaw.tools.tool import RunScope, ToolContext

AGENT = "writer"


def call(root: Path, name: str, config: FilesConfig | None = None, **arguments: Any) -> Any:
    tool = file_tools(root, config or FilesConfig())[name]
    params = tool.spec.parse(msgspec.json.encode(arguments))
    assert not isinstance(params, ToolError), params
    scope = cast(RunScope, SimpleNamespace(threads=HandlerThreads(2)))
    ctx = ToolContext(AGENT, uuid.uuid4(), "c1", "k", logging.getLogger("t"), scope)
    return asyncio.run(tool.execute(params, ctx))


def code(result: Any) -> str:
    assert isinstance(result, ToolError), result
    return result.error_code


def test_write_read_edit_list(tmp_path: Path) -> None:
    written = call(tmp_path, "write_file", path="notes/a.txt", content="one\ntwo\nthree\n")
    assert written == {
        "path": "notes/a.txt",
        "bytes": 14,
        "sha256": hashlib.sha256(b"one\ntwo\nthree\n").hexdigest(),
        "created": True,
    }
    assert (tmp_path / AGENT / "notes" / "a.txt").read_text() == "one\ntwo\nthree\n"
    read = call(tmp_path, "read_file", path="notes/a.txt", start_line=2, max_lines=1)
    assert (read["content"], read["lines"], read["more"]) == ("two\n", 1, True)
    edited = call(tmp_path, "edit_file", path="notes/a.txt", old_text="two", new_text="2")
    assert edited["replacements"] == 1
    assert edited["sha256"] == hashlib.sha256(b"one\n2\nthree\n").hexdigest()
    assert call(tmp_path, "write_file", path="notes/a.txt", content="x")["created"] is False
    listing = call(tmp_path, "list_dir", path="notes")
    assert listing["entries"] == [{"name": "a.txt", "type": "file", "bytes": 1}]


def test_edit_needs_exactly_one_occurrence(tmp_path: Path) -> None:
    call(tmp_path, "write_file", path="a.txt", content="x x")
    assert code(call(tmp_path, "edit_file", path="a.txt", old_text="y", new_text="z")) == (
        "EDIT_TEXT_NOT_FOUND"
    )
    ambiguous = call(tmp_path, "edit_file", path="a.txt", old_text="x", new_text="z")
    assert code(ambiguous) == "EDIT_TEXT_AMBIGUOUS" and "2 times" in ambiguous.error
    assert (tmp_path / AGENT / "a.txt").read_text() == "x x"  # nothing changed
    both = call(tmp_path, "edit_file", path="a.txt", old_text="x", new_text="z", replace_all=True)
    assert both["replacements"] == 2 and (tmp_path / AGENT / "a.txt").read_text() == "z z"


@pytest.mark.parametrize("name", ["read_file", "write_file", "edit_file", "list_dir"])
@pytest.mark.parametrize("path", ["../other/secret.txt", "/etc/passwd", "a/../../x"])
def test_dot_dot_and_absolute_escapes_are_refused(tmp_path: Path, name: str, path: str) -> None:
    args: dict[str, Any] = {"path": path}
    if name == "write_file":
        args["content"] = "pwned"
    if name == "edit_file":
        args |= {"old_text": "a", "new_text": "b"}
    assert code(call(tmp_path, name, **args)) == "PATH_OUTSIDE_WORKSPACE"
    assert not (tmp_path / "other").exists()


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (tmp_path / AGENT).mkdir()
    (tmp_path / AGENT / "link").symlink_to(outside)
    assert code(call(tmp_path, "read_file", path="link/secret.txt")) == "PATH_OUTSIDE_WORKSPACE"
    write = call(tmp_path, "write_file", path="link/secret.txt", content="x")
    assert code(write) == "PATH_OUTSIDE_WORKSPACE"
    assert (outside / "secret.txt").read_text() == "s3cret"


def test_size_limits_and_binary_files(tmp_path: Path) -> None:
    small = FilesConfig(max_file_bytes=10, max_list_entries=2)
    assert code(call(tmp_path, "write_file", small, path="big", content="x" * 11)) == (
        "FILE_TOO_LARGE"
    )
    (tmp_path / AGENT / "bin").write_bytes(b"\x00\x01\x02")
    assert code(call(tmp_path, "read_file", path="bin")) == "BINARY_FILE"
    for i in range(3):
        call(tmp_path, "write_file", path=f"f{i}", content="x")
    listing = call(tmp_path, "list_dir", small)
    assert len(listing["entries"]) == 2 and listing["more"] == 2
    assert code(call(tmp_path, "read_file", path="missing")) == "FILE_NOT_FOUND"
    assert code(call(tmp_path, "list_dir", path="f0")) == "NOT_A_DIRECTORY"
