"""Confine a model-supplied path to the agent's workspace directory.

The path is resolved (symlinks followed, ``..`` collapsed) before the containment check, so
neither ``..`` nor a symlink pointing outside the workspace can reach another file.
"""

from __future__ import annotations

from pathlib import Path


class PathEscapeError(ValueError):
    """The path resolves outside the workspace."""


def confine(workspace: Path, path: str) -> Path:
    """Return ``path`` (relative to ``workspace``) resolved, or raise PathEscapeError."""
    root = workspace.resolve()
    if "\x00" in path:
        raise PathEscapeError(f"path {path!r} contains a NUL byte")
    target = (root / path).resolve()
    if target != root and not target.is_relative_to(root):
        raise PathEscapeError(f"path {path!r} is outside the workspace")
    return target
