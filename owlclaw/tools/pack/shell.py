"""exec: a shell command in the agent's workspace, bounded in time and output.

The command runs with ``/bin/sh -c`` in its own process group (a timeout kills the whole
group, children included), with a minimal environment: PATH, HOME (the workspace), LANG and
only the variables the app names in ``[tools.exec] env`` — never the runtime's provider keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import msgspec

from owlclaw.tools.builtin.params import Params
from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.commands import refusal
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

READ_CHUNK = 65536
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


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

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        assert isinstance(params, Exec)
        workspace = (self.workspaces / ctx.agent_id).resolve()
        reason = refusal(params.command, PurePosixPath(workspace), frozenset(self.config.deny))
        if reason is not None:
            return ToolError(error=f"command refused: {reason}", error_code="COMMAND_DENIED")
        workspace.mkdir(parents=True, exist_ok=True)
        limit = min(params.timeout_s or self.config.timeout_s, self.config.timeout_s)
        return await self._run(params.command, workspace, limit)

    async def _run(self, command: str, workspace: Path, limit: float) -> Any:
        env = {"PATH": SAFE_PATH, "HOME": str(workspace), "LANG": "C.UTF-8"}
        env |= {name: os.environ[name] for name in self.config.env if name in os.environ}
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
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


def exec_tools(workspaces: Path, config: ExecConfig) -> dict[str, Tool]:
    spec = ToolSpec(
        "exec",
        "Run a shell command in your workspace directory; returns exit_code, stdout, stderr.",
        Exec,
        timeout_s=config.timeout_s + 5,  # the command's own limit fires first, with its output
        category="shell",
        dangerous=True,
        ask_if="True" if config.ask else None,
    )
    return {"exec": ExecTool(spec, workspaces, config)}
