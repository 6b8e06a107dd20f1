"""A pids cgroup per exec command: the process limit that holds when the runtime is root.

The kernel exempts uid 0 from RLIMIT_NPROC, and bubblewrap run by root keeps the sandbox's
processes uid 0 on the host, so a root runtime bounds a command's processes with a cgroup
instead: each command gets its own child of the runtime's pids cgroup with ``pids.max`` set to
the limit, the command joins it before it execs bwrap (``JOIN``), and the child is removed once
the command has ended (bwrap's PID namespace takes every process of the command down with it).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import uuid
from pathlib import Path

import psutil

log = logging.getLogger("owlclaw.tools")

OWN = "owlclaw"
"""The directory under the runtime's pids cgroup that holds one child per running command."""
JOIN = ("/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"')
"""Followed by a ``cgroup.procs`` path and an argv: moves itself into that cgroup, then execs
the argv (bwrap), so every process of the command is born inside the cgroup."""
REMOVE_TRIES = 1000
REMOVE_PAUSE_S = 0.01


def find_pids_parent() -> Path | None:
    """The runtime's own pids cgroup when it can make children there, or None.

    A cgroup v2 one counts when it already hands the pids controller to its children; else the
    cgroup v1 ``pids`` hierarchy. Either must be mounted read-write and writable by this process.
    """
    try:
        own_cgroups = Path("/proc/self/cgroup").read_text()
    except OSError:  # not Linux, or no cgroups at all
        return None
    mounts = [(p.mountpoint, p.fstype, p.opts) for p in psutil.disk_partitions(all=True)]
    return pids_parent(mounts, own_cgroups)


def pids_parent(mounts: list[tuple[str, str, str]], own_cgroups: str) -> Path | None:
    """``find_pids_parent`` over a mount table (mount point, type, options) and the text of
    ``/proc/self/cgroup`` (``id:controllers:path`` lines; cgroup v2's has no controllers)."""
    own = {
        name: path
        for _, names, path in (line.split(":", 2) for line in own_cgroups.splitlines() if line)
        for name in names.split(",")
    }
    found: dict[str, Path] = {}
    for mountpoint, fstype, opts in mounts:
        options = opts.split(",")
        if "rw" not in options:
            continue
        if fstype == "cgroup2" and "" in own:
            candidate = _own_dir(Path(mountpoint), own[""])
            if "pids" in _words(candidate / "cgroup.subtree_control"):
                found.setdefault("v2", candidate)
        elif fstype == "cgroup" and "pids" in options and "pids" in own:
            found.setdefault("v1", _own_dir(Path(mountpoint), own["pids"]))
    for version in ("v2", "v1"):
        if version in found and os.access(found[version], os.W_OK):
            return found[version]
    return None


def new_cgroup(parent: Path, processes: int) -> Path:
    """A new pids cgroup under ``parent`` that allows ``processes`` at once (a process joins
    it through its ``cgroup.procs``)."""
    own = parent / OWN
    own.mkdir(exist_ok=True)
    if (own / "cgroup.subtree_control").exists():  # cgroup v2: hand pids on to the commands
        (own / "cgroup.subtree_control").write_text("+pids")
    group = own / uuid.uuid4().hex
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(processes))
    except OSError:
        group.rmdir()
        raise
    return group


async def remove_cgroup(group: Path) -> None:
    """Removes ``group`` once it is empty: the last processes of a PID namespace may still be
    exiting when bwrap has."""
    for _ in range(REMOVE_TRIES):
        try:
            group.rmdir()
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
        await asyncio.sleep(REMOVE_PAUSE_S)
    log.warning("the pids cgroup %s still has processes; it was left in place", group)


def _own_dir(mountpoint: Path, path: str) -> Path:
    """The runtime's cgroup in a hierarchy; the mount point itself when the mount's root is
    that cgroup (a container's view without a cgroup namespace)."""
    inside = mountpoint / path.lstrip("/")
    return inside if inside.is_dir() else mountpoint


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()
