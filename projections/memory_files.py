"""MEMORY.md and MEMORY.archive.md: one agent's memories rendered as files, written atomically.

Its own module because rendering is file work (fences, paths, fsync and rename), apart from
the view's table upkeep: the view calls it after a batch commits, and ``owlclaw memory`` and the
demo call it on demand. The view sizes each memory by its rendered entry, so the MEMORY.md size
limit is counted in the bytes written here.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import Cursor

from projections.provenance import reference
from projections.view import View

NOTE = "<!-- rendered by OwlClaw from the ledger; edits are lost -->"


def render_entry(
    memory_id: UUID, created_at: datetime, tags: Sequence[str], content: str, source: str = ""
) -> str:
    """One MEMORY.md entry, its heading ending with where it came from (``source``, e.g.
    ``run 12, step 3``: ``owlclaw explain AGENT 12 3`` shows that step). Content sits in a tilde
    fence longer than any run inside it, so it stays inert text whatever it contains."""
    longest = max((len(m) for m in re.findall(r"~+", content)), default=0)
    fence = "~" * max(4, longest + 1)
    stamp = created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    tag_line = ", ".join(tags) if tags else "-"
    heading = f"## {stamp} · {memory_id}" + (f" ({source})" if source else "")
    return f"{heading}\n\ntags: {tag_line}\n\n{fence}text\n{content}\n{fence}\n\n"


def agent_directory(memory_dir: Path, agent_id: str) -> Path:
    """``memory_dir/<agent_id>``; an agent id that is not one plain path component is refused
    (ValueError), so no agent's files land outside its own directory."""
    if agent_id in ("", ".", "..") or Path(agent_id).name != agent_id or "\\" in agent_id:
        raise ValueError(f"agent id {agent_id!r} cannot name a directory")
    return memory_dir / agent_id


def write_atomically(path: Path, content: str) -> None:
    """Replace ``path`` with ``content`` all at once: a reader sees the old file or the new one,
    never a part, and a crash leaves one of them (temp file in the same directory, fsync,
    rename)."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_memory_files(
    curs: Cursor[Any], view: View, agent_id: str, directory: Path
) -> tuple[Path, Path]:
    """Write MEMORY.md (active memories) and MEMORY.archive.md (archived) for one agent from the
    view as ``curs`` sees it. Forgotten memories are in neither.

    Entries are ordered by time then log position; the same view always gives the same bytes.
    """
    rows = curs.execute(
        view.sql(
            "SELECT memory_id, created_at, tags, content, archived, run_no, step FROM {memories}"
            " WHERE agent_id = %s ORDER BY created_at, position"
        ),
        (agent_id,),
    ).fetchall()
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / "MEMORY.md", directory / "MEMORY.archive.md")
    for path, archived in zip(paths, (False, True), strict=True):
        title = f"# {path.name} — {agent_id}\n\n{NOTE}\n\n"
        body = "".join(
            render_entry(
                r["memory_id"],
                r["created_at"],
                r["tags"],
                view.ledger.sealer.open(r["content"]),
                reference(r["run_no"], r["step"]),
            )
            for r in rows
            if r["archived"] == archived
        )
        write_atomically(path, title + body)
    return paths


def render_memory_files(view: View, agent_id: str, directory: Path) -> tuple[Path, Path]:
    """Write MEMORY.md and MEMORY.archive.md for one agent into ``directory`` now."""
    with view.transaction(commit=False) as curs:
        return write_memory_files(curs, view, agent_id, directory)
