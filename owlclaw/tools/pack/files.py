"""Workspace files: read_file, write_file, edit_file, list_dir.

Every path the model gives is confined to the agent's workspace (``<workspaces>/<agent id>``)
after resolution, so neither ``..`` nor a symlink reaches another file. A write is atomic (a
temporary file in the same directory, then a rename) and its result carries the content's
sha256: the run's ToolCallCompleted says which run wrote which version of a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

import msgspec

from owlclaw.tools.builtin.params import Params
from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.confine import PathEscapeError, confine
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

BINARY_SNIFF_BYTES = 8192

WorkspacePath = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1024,
        description="Path relative to your workspace directory",
    ),
]


class FilesConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[tools.files]`` table of an app's owlclaw.toml."""

    max_file_bytes: Annotated[int, msgspec.Meta(ge=1, le=100 * 1024 * 1024)] = 1024 * 1024
    """Largest file write_file and edit_file produce."""
    max_list_entries: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 500
    """list_dir shows at most this many entries (and says how many more there are)."""


class ReadFile(Params):
    path: WorkspacePath
    start_line: Annotated[int, msgspec.Meta(ge=1, description="First line to read")] = 1
    max_lines: Annotated[
        int, msgspec.Meta(ge=1, le=10_000, description="How many lines to read at most")
    ] = 2000


class WriteFile(Params):
    path: WorkspacePath
    content: Annotated[str, msgspec.Meta(description="The whole new content of the file")]


class EditFile(Params):
    path: WorkspacePath
    old_text: Annotated[
        str, msgspec.Meta(min_length=1, description="Exact text to replace (must be unique)")
    ]
    new_text: Annotated[str, msgspec.Meta(description="Text to put in its place")]
    replace_all: Annotated[
        bool, msgspec.Meta(description="Replace every occurrence instead of exactly one")
    ] = False


class ListDir(Params):
    path: Annotated[
        str, msgspec.Meta(max_length=1024, description="Directory relative to your workspace")
    ] = "."


class FileProblem(Exception):
    """What went wrong, as the model should see it."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.error = ToolError(error=message, error_code=code)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inside(workspace: Path, path: str) -> Path:
    workspace.mkdir(parents=True, exist_ok=True)
    try:
        return confine(workspace, path)
    except PathEscapeError as e:
        raise FileProblem(str(e), "PATH_OUTSIDE_WORKSPACE") from e


def _relative(workspace: Path, target: Path) -> str:
    return str(target.relative_to(workspace.resolve())) or "."


def _existing_file(workspace: Path, path: str) -> Path:
    target = _inside(workspace, path)
    if not target.exists():
        raise FileProblem(f"no file {path!r} in your workspace", "FILE_NOT_FOUND")
    if not target.is_file():
        raise FileProblem(f"{path!r} is not a regular file", "NOT_A_FILE")
    return target


def _text(target: Path, path: str) -> str:
    data = target.read_bytes()
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise FileProblem(f"{path!r} is a binary file", "BINARY_FILE")
    return data.decode("utf-8", errors="replace")


def read_file(workspace: Path, config: FilesConfig, params: ReadFile) -> dict[str, Any]:
    target = _existing_file(workspace, params.path)
    with target.open("rb") as f:
        if b"\x00" in f.read(BINARY_SNIFF_BYTES):
            raise FileProblem(f"{params.path!r} is a binary file", "BINARY_FILE")
        f.seek(0)
        first = params.start_line - 1
        window = list(islice(f, first, first + params.max_lines + 1))
    more = len(window) > params.max_lines
    lines = window[: params.max_lines]
    return {
        "path": _relative(workspace, target),
        "content": b"".join(lines).decode("utf-8", errors="replace"),
        "start_line": params.start_line,
        "lines": len(lines),
        "more": more,
        "bytes": target.stat().st_size,
    }


def _write(workspace: Path, config: FilesConfig, target: Path, data: bytes) -> dict[str, Any]:
    if len(data) > config.max_file_bytes:
        raise FileProblem(
            f"{len(data)} bytes is more than the {config.max_file_bytes} a file may have",
            "FILE_TOO_LARGE",
        )
    if target.is_dir():
        raise FileProblem(f"{_relative(workspace, target)!r} is a directory", "NOT_A_FILE")
    created = not target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(temporary).replace(target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return {
        "path": _relative(workspace, target),
        "bytes": len(data),
        "sha256": _sha256(data),
        "created": created,
    }


def write_file(workspace: Path, config: FilesConfig, params: WriteFile) -> dict[str, Any]:
    target = _inside(workspace, params.path)
    return _write(workspace, config, target, params.content.encode())


def edit_file(workspace: Path, config: FilesConfig, params: EditFile) -> dict[str, Any]:
    target = _existing_file(workspace, params.path)
    if target.stat().st_size > config.max_file_bytes:
        raise FileProblem(
            f"{params.path!r} is larger than the {config.max_file_bytes} bytes a file may have",
            "FILE_TOO_LARGE",
        )
    text = _text(target, params.path)
    count = text.count(params.old_text)
    if count == 0:
        raise FileProblem(
            f"old_text does not occur in {params.path!r}; read the file and copy the exact text",
            "EDIT_TEXT_NOT_FOUND",
        )
    if count > 1 and not params.replace_all:
        raise FileProblem(
            f"old_text occurs {count} times in {params.path!r}; give more surrounding text to "
            "make it unique, or set replace_all",
            "EDIT_TEXT_AMBIGUOUS",
        )
    result = _write(
        workspace, config, target, text.replace(params.old_text, params.new_text).encode()
    )
    return {**result, "replacements": count}


def list_dir(workspace: Path, config: FilesConfig, params: ListDir) -> dict[str, Any]:
    target = _inside(workspace, params.path)
    if not target.is_dir():
        raise FileProblem(f"no directory {params.path!r} in your workspace", "NOT_A_DIRECTORY")
    children = sorted(target.iterdir(), key=lambda p: p.name)
    entries = []
    for child in children[: config.max_list_entries]:
        kind = "symlink" if child.is_symlink() else "dir" if child.is_dir() else "file"
        entry: dict[str, Any] = {"name": child.name, "type": kind}
        if kind == "file":
            entry["bytes"] = child.stat().st_size
        entries.append(entry)
    return {
        "path": _relative(workspace, target),
        "entries": entries,
        "more": max(0, len(children) - config.max_list_entries),
    }


Action = Callable[[Path, FilesConfig, Any], dict[str, Any]]


@dataclass(frozen=True)
class WorkspaceTool:
    spec: ToolSpec
    act: Action
    workspaces: Path
    config: FilesConfig

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        return await ctx.scope.threads.call(
            self._act, workspace=self.workspaces / ctx.agent_id, params=params
        )

    def _act(self, workspace: Path, params: msgspec.Struct) -> dict[str, Any] | ToolError:
        try:
            return self.act(workspace, self.config, params)
        except FileProblem as e:
            return e.error
        except PermissionError as e:
            return ToolError(
                error=f"permission denied: {e.filename}", error_code="PERMISSION_DENIED"
            )


def file_tools(workspaces: Path, config: FilesConfig) -> dict[str, Tool]:
    """The four workspace tools, acting in ``workspaces/<agent id>``."""

    def tool(name: str, description: str, params: type[Params], act: Action, **meta: Any) -> Tool:
        spec = ToolSpec(name, description, params, category="files", **meta)
        return WorkspaceTool(spec, act, workspaces, config)

    return {
        "read_file": tool(
            "read_file",
            "Read a text file of your workspace (a window of lines; 'more' says if it goes on).",
            ReadFile,
            read_file,
            idempotent=True,
        ),
        "write_file": tool(
            "write_file",
            "Create or overwrite a file of your workspace with the given content.",
            WriteFile,
            write_file,
            idempotent=True,
            parallel_safe=False,  # a read of the same response may come after it
        ),
        "edit_file": tool(
            "edit_file",
            "Replace an exact piece of text in a file of your workspace (old_text must occur "
            "exactly once unless replace_all).",
            EditFile,
            edit_file,
        ),
        "list_dir": tool(
            "list_dir",
            "List a directory of your workspace (name, type, size).",
            ListDir,
            list_dir,
            idempotent=True,
        ),
    }
