"""exec's sandbox against the escapes the deny check cannot see: each attack is a script the
agent wrote into its workspace (as write_file would) and runs with ``sh``/``bash``/``python3``,
which the check lets through. Each test runs twice: under bubblewrap, where it must pass, and
under the unsandboxed guard (``sandbox = "none"``), where it is expected to fail (strict xfail:
the attack works there, which is what the sandbox is for)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import psutil
import pytest

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.sandbox import Limits, sandboxed
from owlclaw.tools.pack.shell import ExecConfig, exec_tools
from owlclaw.tools.tool import RunScope, ToolContext
from tests.components import require_bwrap

AGENT = "sheller"
UNSANDBOXED = pytest.mark.xfail(strict=True, reason="the unsandboxed guard lets this through")


@pytest.fixture(
    params=["bwrap", pytest.param("none", marks=UNSANDBOXED)], ids=["sandbox", "guard-only"]
)
def config(request: pytest.FixtureRequest) -> ExecConfig:
    if request.param == "bwrap":
        require_bwrap()
    return ExecConfig(sandbox=request.param, memory_mb=512, processes=32)


def run(root: Path, command: str, config: ExecConfig) -> Any:
    tool = exec_tools(root, config)["exec"]
    params = tool.spec.parse(msgspec.json.encode({"command": command}))
    assert not isinstance(params, ToolError), params
    ctx = ToolContext(AGENT, uuid.uuid4(), "c1", "k", logging.getLogger("t"), cast(RunScope, None))
    return asyncio.run(tool.execute(params, ctx))


def script(root: Path, name: str, text: str) -> Path:
    """A file the agent wrote into its workspace."""
    path = root / AGENT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_a_normal_command_works_and_its_output_returns(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap":
        require_bwrap()
    config = msgspec.convert({"sandbox": sandbox}, ExecConfig)
    (tmp_path / AGENT).mkdir()
    (tmp_path / AGENT / "notes.txt").write_text("b\na\n")
    result = run(tmp_path, "sort notes.txt > sorted.txt && cat sorted.txt | wc -l", config)
    assert result == {"exit_code": 0, "stdout": "2\n", "stderr": ""}
    assert (tmp_path / AGENT / "sorted.txt").read_text() == "a\nb\n"


@pytest.mark.parametrize("via", ["path", "symlink", "proc-root"])
def test_no_write_outside_the_workspace(tmp_path: Path, config: ExecConfig, via: str) -> None:
    """Another agent's workspace, next to this one: by its path, through a symlink planted in
    this workspace, and through /proc/self/root."""
    other = tmp_path / "other-agent"
    other.mkdir()
    (tmp_path / AGENT).mkdir()
    (tmp_path / AGENT / "link").symlink_to(other)
    target = {"path": f"{other}/stolen", "symlink": "link/stolen"}.get(
        via, f"/proc/self/root{other}/stolen"
    )
    script(tmp_path, "escape.sh", f"echo pwned > '{target}'\n")
    run(tmp_path, "sh escape.sh", config)
    assert not (other / "stolen").exists()


def test_etc_shadow_is_not_readable(tmp_path: Path, config: ExecConfig) -> None:
    if not Path("/etc/shadow").exists():
        pytest.skip("this host has no /etc/shadow")
    script(tmp_path, "peek.sh", "cat /etc/shadow >/dev/null 2>&1 && echo READ || echo refused\n")
    assert run(tmp_path, "sh peek.sh", config)["stdout"] == "refused\n"


def test_no_network_not_even_loopback(tmp_path: Path, config: ExecConfig) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script(tmp_path, "call.sh", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED\n")
        result = run(tmp_path, "bash call.sh", config)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "CONNECTED" not in result["stdout"]


@pytest.mark.xfail(
    os.geteuid() == 0,
    strict=True,
    reason="the kernel exempts root (host uid 0) from RLIMIT_NPROC: run OwlClaw as another user",
)
def test_a_fork_bomb_is_bounded_by_the_process_limit(tmp_path: Path, config: ExecConfig) -> None:
    """A bounded bomb: 100 sleeping children, far more than the limit of 32."""
    script(
        tmp_path,
        "bomb.sh",
        "n=0; while [ $n -lt 100 ]; do sleep 30 & n=$((n+1)); done; echo started $n\n",
    )
    result = run(tmp_path, "sh bomb.sh; kill 0", config)
    assert "started 100" not in result["stdout"]


def test_a_memory_hog_is_stopped_by_the_memory_limit(tmp_path: Path, config: ExecConfig) -> None:
    """2 GB asked for at once, four times the limit (calloc: no page is touched if it works)."""
    script(tmp_path, "hog.py", "buffer = bytearray(2 << 30)\nprint('allocated')\n")
    result = run(tmp_path, "python3 hog.py", config)
    assert result["exit_code"] != 0 and "allocated" not in result["stdout"]


@pytest.fixture
def survivor_marker() -> Iterator[str]:
    """A unique sleep duration; its process is killed afterwards if the guard let it live."""
    marker = f"300.{uuid.uuid4().int % 10**9}"
    yield marker
    for process in survivors(marker):
        os.kill(process.pid, signal.SIGKILL)


def survivors(marker: str) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["cmdline"] == ["sleep", marker] and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def test_no_child_survives_the_command(
    tmp_path: Path, config: ExecConfig, survivor_marker: str
) -> None:
    """A double fork into a new session, detached from every pipe, outlives its shell."""
    script(tmp_path, "linger.sh", f"(setsid sleep {survivor_marker} >/dev/null 2>&1 &) &\n")
    result = run(tmp_path, "sh linger.sh; echo done", config)
    assert result["stdout"] == "done\n"
    assert survivors(survivor_marker) == []


def test_without_bwrap_exec_refuses_and_names_the_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run(tmp_path, "echo hi", ExecConfig())
    assert isinstance(result, ToolError) and result.error_code == "SANDBOX_MISSING"
    assert "bubblewrap" in result.error and 'sandbox = "none"' in result.error
    assert not (tmp_path / AGENT).exists()


def test_the_guard_alone_runs_without_bwrap_when_the_app_opts_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert run(tmp_path, "echo hi", ExecConfig(sandbox="none"))["stdout"] == "hi\n"


def test_a_file_over_the_size_limit_is_cut_short(tmp_path: Path) -> None:
    require_bwrap()
    script(tmp_path, "fill.py", "open('big', 'wb').write(bytes(3 << 20))\nprint('written')\n")
    result = run(tmp_path, "python3 fill.py", ExecConfig(file_mb=1))
    assert result["exit_code"] != 0 and "written" not in result["stdout"]
    assert (tmp_path / AGENT / "big").stat().st_size <= 1 << 20


def test_the_network_is_shared_when_the_app_allows_it(tmp_path: Path) -> None:
    require_bwrap()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script(tmp_path, "call.sh", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED\n")
        result = run(tmp_path, "bash call.sh", ExecConfig(network=True))
        listener.accept()[0].close()
    assert result["stdout"] == "CONNECTED\n"


def test_the_sandbox_binds_no_secret_of_etc_and_shares_the_network_only_when_allowed() -> None:
    limits = Limits(cpu_s=5, memory_bytes=1 << 28, processes=16, file_bytes=1 << 20)
    closed = sandboxed("bwrap", "true", Path("/w/agent"), limits, network=False)
    shared = sandboxed("bwrap", "true", Path("/w/agent"), limits, network=True)
    assert not {"/etc/shadow", "/etc/gshadow", "/etc", "/"} & set(closed)
    assert "--unshare-all" in closed and "--share-net" not in closed and "--share-net" in shared
    assert closed[closed.index("--bind") : closed.index("--bind") + 3] == [
        "--bind",
        "/w/agent",
        "/w/agent",
    ]
    assert closed[-9:] == [
        "/usr/bin/prlimit",
        "--cpu=5",
        f"--as={1 << 28}",
        "--nproc=16",
        f"--fsize={1 << 20}",
        "--",
        "/bin/sh",
        "-c",
        "true",
    ]
