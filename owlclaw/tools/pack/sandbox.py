"""The bubblewrap command line exec runs a shell command under.

The sandbox sees the agent's workspace read-write, the system's programs and libraries
read-only, and from /etc only what programs need to start and name users (never /etc/shadow
or /etc/gshadow); /tmp is its own, empty. It has its own namespaces (no network unless the app
allows it, its own PIDs, so nothing outlives the command), no capabilities, a new session
(no terminal to inject keystrokes into), and dies with the runtime. The rlimits are set by
``prlimit`` inside the sandbox, after its user namespace exists, so the process count is the
sandbox's own, not the host user's. The kernel exempts root from that count, so a root runtime
has the command join its own pids cgroup first (``pids_cgroup.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from owlclaw.tools.pack.pids_cgroup import JOIN

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only when present (on merged-/usr systems most are symlinks into /usr)."""
ETC = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd",
    "group", "nsswitch.conf", "hosts", "host.conf", "gai.conf", "resolv.conf", "services",
    "protocols", "ssl", "ca-certificates", "mime.types", "magic", "magic.mime",
)  # fmt: skip
"""The /etc entries bound read-only when present: the loader, users and groups by name,
name resolution, certificates, file types. A symlink among them (``resolv.conf`` into /run) is
bound as the file it points to."""
PRLIMIT = "/usr/bin/prlimit"


@dataclass(frozen=True)
class Limits:
    """What one command may use; each holds for every process in the sandbox."""

    cpu_s: int
    memory_bytes: int
    """The address space of each process (RLIMIT_AS)."""
    processes: int
    """Processes and threads at once (0: the runtime's own limit, none of the sandbox's)."""
    file_bytes: int
    """The largest file a process may write (RLIMIT_FSIZE)."""


def find_bwrap() -> str | None:
    """The bwrap binary on PATH, or None when bubblewrap is not installed."""
    return shutil.which("bwrap")


def sandboxed(
    bwrap: str,
    command: str,
    workspace: Path,
    limits: Limits,
    *,
    network: bool,
    cgroup_procs: Path | None = None,
) -> list[str]:
    """The argv that runs ``/bin/sh -c command`` in ``workspace`` inside the sandbox, having
    joined the cgroup whose ``cgroup.procs`` is given, if one is."""
    argv = [*JOIN, str(cgroup_procs)] if cgroup_procs else []
    argv += [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        argv.append("--share-net")
    for path in SYSTEM:
        argv += _read_only(Path(path))
    for name in ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace), str(workspace), "--chdir", str(workspace)]
    argv += [
        "--",
        PRLIMIT,
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_bytes}",
        *([f"--nproc={limits.processes}"] if limits.processes else []),
        f"--fsize={limits.file_bytes}",
        "--",
        "/bin/sh",
        "-c",
        command,
    ]
    return argv


def _read_only(path: Path) -> list[str]:
    """A symlink stays a symlink (merged /usr: ``/bin -> usr/bin``); a directory is bound."""
    if path.is_symlink():
        return ["--symlink", str(path.readlink()), str(path)]
    if path.exists():
        return ["--ro-bind", str(path), str(path)]
    return []
