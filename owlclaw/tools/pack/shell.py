"""exec: a shell command in the agent's workspace, bounded in time, output and resources.

The command runs with ``/bin/sh -c`` under bubblewrap (``sandbox.py``): it can write only the
workspace, read no secrets of the host, reach no network unless the app allows it, and is
bounded by rlimits. Without bwrap on the host exec refuses to run, unless the app opts into the
deny check alone (``sandbox = "none"``). Either way it runs in its own process group (a timeout
kills the whole group) with a minimal environment: PATH, HOME (the workspace), LANG and only
the variables the app names in ``[tools.exec] env`` — never the runtime's provider keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import msgspec

from owlclaw.tools.builtin.params import Params
from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.commands import refusal
from owlclaw.tools.pack.pids_cgroup import find_pids_parent, new_cgroup, remove_cgroup
from owlclaw.tools.pack.sandbox import Limits, find_bwrap, sandboxed
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

READ_CHUNK = 65536
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
MB = 1024 * 1024
MIN_PROCESSES = 4


class ExecConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[tools.exec]`` table of an app's owlclaw.toml."""

    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 30.0
    """A command still running after this is killed (with its children)."""
    output_bytes: Annotated[int, msgspec.Meta(ge=256, le=10 * 1024 * 1024)] = 64 * 1024
    """stdout and stderr are each kept up to this size; the rest is counted, not kept."""
    ask: bool = True
    """Each call waits for a person's approval (the app's ``[governance] ask_if.exec`` wins)."""
    env: tuple[str, ...] = ()
    """Names of environment variables passed through to commands."""
    deny: tuple[str, ...] = ()
    """Program names refused in addition to the built-in deny list."""
    sandbox: Literal["bwrap", "none"] = "bwrap"
    """``bwrap``: run under bubblewrap, refuse to run without it; ``none``: the deny check
    alone (an explicit opt-in: the command can do whatever the runtime's user can)."""
    network: bool = False
    """The sandbox shares the host's network (else it has none, not even loopback)."""
    cpu_s: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 60
    """CPU seconds each process of the command may use."""
    memory_mb: Annotated[int, msgspec.Meta(ge=64, le=64 * 1024)] = 1024
    """Address space of each process of the command."""
    processes: Annotated[int, msgspec.Meta(ge=0, le=4096)] = 128
    """Processes (and threads) the command may have at once; 0: no limit (the only way to run
    exec under a root runtime that has no writable pids cgroup)."""
    file_mb: Annotated[int, msgspec.Meta(ge=1, le=64 * 1024)] = 256
    """The largest file the command may write."""

    def __post_init__(self) -> None:
        if 0 < self.processes < MIN_PROCESSES:
            raise ValueError(
                f"processes must be 0 (no limit) or at least {MIN_PROCESSES} "
                "(bwrap itself takes two)"
            )

    def limits(self) -> Limits:
        return Limits(self.cpu_s, self.memory_mb * MB, self.processes, self.file_mb * MB)


class Exec(Params):
    command: Annotated[
        str, msgspec.Meta(min_length=1, max_length=8192, description="Shell command to run")
    ]
    timeout_s: (
        Annotated[
            float, msgspec.Meta(gt=0, description="Time limit in seconds (at most the app's limit)")
        ]
        | None
    ) = None


class _Capped:
    """The first ``limit`` bytes of a stream, and how many bytes came after them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_CHUNK):
            room = self.limit - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        return text + (f"\n[... {self.dropped} more bytes not kept]" if self.dropped else "")


@dataclass(frozen=True)
class ExecTool:
    spec: ToolSpec
    workspaces: Path
    config: ExecConfig
    bwrap: str | None
    """The bubblewrap binary (None: not installed)."""
    pids_parent: Path | None
    """Where each command gets its own pids cgroup, which bounds its processes when the
    runtime is root (None: no writable pids cgroup, or not root: RLIMIT_NPROC does it)."""

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        assert isinstance(params, Exec)
        workspace = (self.workspaces / ctx.agent_id).resolve()
        reason = refusal(params.command, PurePosixPath(workspace), frozenset(self.config.deny))
        if reason is not None:
            return ToolError(error=f"command refused: {reason}", error_code="COMMAND_DENIED")
        limit = min(params.timeout_s or self.config.timeout_s, self.config.timeout_s)
        if self.config.sandbox == "none":
            workspace.mkdir(parents=True, exist_ok=True)
            return await self._run(["/bin/sh", "-c", params.command], workspace, limit)
        return await self._run_sandboxed(params.command, workspace, limit)

    async def _run_sandboxed(self, command: str, workspace: Path, limit: float) -> Any:
        """Under bwrap; as root, in a pids cgroup of its own (the kernel exempts root from
        RLIMIT_NPROC), removed when the command has ended."""
        if self.bwrap is None:
            return ToolError(
                error="exec runs commands under bubblewrap and bwrap is not installed on "
                "this host: install it (Debian: apt-get install bubblewrap), or set "
                '[tools.exec] sandbox = "none" to run commands under the deny check alone',
                error_code="SANDBOX_MISSING",
                kind="system",
            )
        limits = self.config.limits()
        network = self.config.network
        if limits.processes == 0 or os.geteuid() != 0:
            workspace.mkdir(parents=True, exist_ok=True)
            argv = sandboxed(self.bwrap, command, workspace, limits, network=network)
            return await self._run(argv, workspace, limit)
        if self.pids_parent is None:
            return _limits_error(
                "it found no writable pids cgroup (cgroup v1's pids hierarchy, or a cgroup v2 "
                "one that delegates the pids controller)"
            )
        try:
            group = new_cgroup(self.pids_parent, limits.processes)
        except OSError as error:
            return _limits_error(f"making a pids cgroup under {self.pids_parent} failed: {error}")
        try:
            workspace.mkdir(parents=True, exist_ok=True)
            argv = sandboxed(
                self.bwrap,
                command,
                workspace,
                limits,
                network=network,
                cgroup_procs=group / "cgroup.procs",
            )
            return await self._run(argv, workspace, limit)
        finally:
            await remove_cgroup(group)

    async def _run(self, argv: list[str], workspace: Path, limit: float) -> Any:
        env = {"PATH": SAFE_PATH, "HOME": str(workspace), "LANG": "C.UTF-8"}
        env |= {name: os.environ[name] for name in self.config.env if name in os.environ}
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        out, err = _Capped(self.config.output_bytes), _Capped(self.config.output_bytes)
        assert process.stdout is not None and process.stderr is not None
        try:
            async with asyncio.timeout(limit):
                await asyncio.gather(out.drain(process.stdout), err.drain(process.stderr))
                code = await process.wait()
        except TimeoutError:
            return ToolError(
                error=f"command did not finish within {limit:g} s and was killed; "
                f"stdout so far: {out.text()[-2000:]!r}; stderr so far: {err.text()[-2000:]!r}",
                error_code="EXEC_TIMEOUT",
                kind="timeout",
            )
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        return {"exit_code": code, "stdout": out.text(), "stderr": err.text()}


def _limits_error(why: str) -> ToolError:
    return ToolError(
        error="OwlClaw runs as root, which the kernel exempts from the process limit, so exec "
        f"bounds a command's processes with a pids cgroup, and {why}: run OwlClaw as another "
        "user, mount the pids cgroup read-write, or set [tools.exec] processes = 0 (no limit)",
        error_code="SANDBOX_LIMITS",
        kind="system",
    )


_SANDBOX_NOTE = " It runs in a sandbox: only the workspace is writable and /tmp is private."


def exec_tools(workspaces: Path, config: ExecConfig) -> dict[str, Tool]:
    spec = ToolSpec(
        "exec",
        "Run a shell command in your workspace directory; returns exit_code, stdout, stderr."
        + (_SANDBOX_NOTE if config.sandbox == "bwrap" else ""),
        Exec,
        timeout_s=config.timeout_s + 5,  # the command's own limit fires first, with its output
        category="shell",
        dangerous=True,
        ask_if="True" if config.ask else None,
    )
    pids_parent = find_pids_parent() if os.geteuid() == 0 else None
    return {"exec": ExecTool(spec, workspaces, config, find_bwrap(), pids_parent)}
