"""exec's sandbox against the escapes the deny check cannot see: each attack is a script the
agent wrote into its workspace (as write_file would) and runs with ``sh``/``bash``/``python3``,
which the check lets through. Each escape test runs twice: under bubblewrap, where it must pass, and
under the unsandboxed guard (``sandbox = "none"``), where it is expected to fail (strict xfail:
the attack works there, which is what the sandbox is for)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import psutil
import pytest

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.pids_cgroup import JOIN, OWN, find_pids_parent, pids_parent
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


def run(root: Path, command: str, config: ExecConfig, pids_parent: Path | None = None) -> Any:
    """The exec tool's answer; ``pids_parent`` replaces the runtime's pids cgroup."""
    tool = exec_tools(root, config)["exec"]
    if pids_parent is not None:
        tool = dataclasses.replace(tool, pids_parent=pids_parent)
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


BOMB = """import os, time
started = 0
try:
    while started < 100:
        if os.fork() == 0:
            os.close(1), os.close(2)
            time.sleep(120)
            os._exit(0)
        started += 1
except OSError as error:
    print(error)
print("started", started)
"""


@pytest.fixture
def bomb_cgroup() -> Iterator[Path | None]:
    """When root, a pids cgroup of this test's own for exec to make its command's cgroup in
    (asserted empty afterwards: the command's cgroup is gone); else None (RLIMIT_NPROC)."""
    if os.geteuid() != 0:
        yield None
        return
    runtime = find_pids_parent()
    assert runtime is not None, "a root runtime needs a writable pids cgroup"
    mine = runtime / f"owlclaw-test-{uuid.uuid4().hex}"
    mine.mkdir()
    yield mine
    left = [path.name for path in mine.glob(f"{OWN}/*") if path.is_dir()]
    assert left == [], f"the command's pids cgroup was left under {mine / OWN}"
    for path in (mine / OWN, mine):
        if path.exists():
            path.rmdir()


def test_a_fork_bomb_is_bounded_by_the_process_limit(
    tmp_path: Path, config: ExecConfig, marker: str, bomb_cgroup: Path | None
) -> None:
    """A script forking until the kernel refuses (100 at most, so the guard alone survives
    it, and under ``timeout``): it gets fewer than the limit of 32, as root (a pids cgroup)
    and not (RLIMIT_NPROC), and none of its processes outlives the command."""
    script(tmp_path, f"bomb-{marker}.py", BOMB)
    result = run(tmp_path, f"timeout 60 python3 bomb-{marker}.py", config, bomb_cgroup)
    assert "Resource temporarily unavailable" in result["stdout"]
    assert int(result["stdout"].split()[-1]) < config.processes
    assert survivors_of_the_sandbox(marker) == []


def test_a_memory_hog_is_stopped_by_the_memory_limit(tmp_path: Path, config: ExecConfig) -> None:
    """2 GB asked for at once, four times the limit (calloc: no page is touched if it works)."""
    script(tmp_path, "hog.py", "buffer = bytearray(2 << 30)\nprint('allocated')\n")
    result = run(tmp_path, "python3 hog.py", config)
    assert result["exit_code"] != 0 and "MemoryError" in result["stderr"]


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique word in the command lines of an attack's processes (a number of seconds, for
    ``sleep``); those still alive afterwards (the guard alone lets them live) are killed."""
    marker = f"3000.{uuid.uuid4().int % 10**12}"
    yield marker
    for process in survivors(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


def survivors(marker: str) -> list[psutil.Process]:
    """The live processes with ``marker`` in their command line."""
    return [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if marker in " ".join(p.info["cmdline"] or ()) and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def survivors_of_the_sandbox(marker: str) -> list[psutil.Process]:
    """``survivors`` once the sandbox is gone: as root exec returns when its pids cgroup is
    empty; otherwise the kernel kills the PID namespace's last processes just after bwrap
    exits (its init dies with its parent), so they get a moment to go."""
    deadline = time.monotonic() + 5
    while (live := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return live


def test_no_child_survives_the_command(tmp_path: Path, config: ExecConfig, marker: str) -> None:
    """A double fork into a new session, detached from every pipe, outlives its shell: the
    shell ends only once the child has started."""
    script(
        tmp_path,
        "linger.sh",
        f"(setsid sh -c 'touch started-{marker}; exec sleep {marker}' >/dev/null 2>&1 &) &\n"
        f"while [ ! -e started-{marker} ]; do sleep 0.01; done\n",
    )
    result = run(tmp_path, "sh linger.sh; echo done", config)
    assert result["stdout"] == "done\n"
    assert survivors_of_the_sandbox(marker) == []


def test_the_sandbox_dies_with_the_runtime(tmp_path: Path, marker: str) -> None:
    """``--die-with-parent``: a Python process standing in for the runtime runs the sandbox's
    argv and is killed mid-command; the command's processes go with it."""
    bwrap = require_bwrap()
    workspace = tmp_path / AGENT
    workspace.mkdir()
    command = f"touch started; sleep {marker}"
    argv = sandboxed(bwrap, command, workspace, ExecConfig(processes=0).limits(), network=False)
    stand_in = "import subprocess, sys; subprocess.run(sys.argv[1:])"
    runtime = subprocess.Popen([sys.executable, "-c", stand_in, *argv], cwd=workspace)
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert survivors(marker), "the command did not start"
    finally:
        runtime.kill()
        runtime.wait()
    assert survivors_of_the_sandbox(marker) == []


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
    assert closed[0] == "bwrap" and closed[-9:] == [
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


def test_a_root_runtime_first_joins_the_commands_pids_cgroup() -> None:
    limits = Limits(cpu_s=5, memory_bytes=1 << 28, processes=0, file_bytes=1 << 20)
    procs = Path("/sys/fs/cgroup/pids/owlclaw/c1/cgroup.procs")
    argv = sandboxed("bwrap", "true", Path("/w/a"), limits, network=False, cgroup_procs=procs)
    assert argv[:5] == [*JOIN, str(procs), "bwrap"]
    assert not [arg for arg in argv if arg.startswith("--nproc")]


def test_a_root_runtime_without_a_pids_cgroup_refuses_and_names_the_ways_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    tool = dataclasses.replace(exec_tools(tmp_path, ExecConfig())["exec"], pids_parent=None)
    params = tool.spec.parse(msgspec.json.encode({"command": "echo hi"}))
    ctx = ToolContext(AGENT, uuid.uuid4(), "c1", "k", logging.getLogger("t"), cast(RunScope, None))
    result = asyncio.run(tool.execute(cast(msgspec.Struct, params), ctx))
    assert isinstance(result, ToolError) and result.error_code == "SANDBOX_LIMITS"
    assert "no writable pids cgroup" in result.error and "processes = 0" in result.error
    assert not (tmp_path / AGENT).exists()


def test_processes_0_runs_without_a_process_limit_and_without_a_cgroup(tmp_path: Path) -> None:
    require_bwrap()
    tool = dataclasses.replace(
        exec_tools(tmp_path, ExecConfig(processes=0))["exec"], pids_parent=tmp_path / "none"
    )
    params = tool.spec.parse(msgspec.json.encode({"command": "ulimit -p"}))
    ctx = ToolContext(AGENT, uuid.uuid4(), "c1", "k", logging.getLogger("t"), cast(RunScope, None))
    result = asyncio.run(tool.execute(cast(msgspec.Struct, params), ctx))
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    own = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    assert result == {"exit_code": 0, "stdout": f"{own}\n", "stderr": ""}


CGROUPS_V1 = "8:pids:/jobs\n4:memory:/x\n1:cpu,cpuacct:/\n0::/\n"


def test_the_pids_cgroup_is_the_v1_hierarchy_at_the_runtimes_own_path(tmp_path: Path) -> None:
    (tmp_path / "pids" / "jobs").mkdir(parents=True)
    mounts = [
        (str(tmp_path / "cpu"), "cgroup", "rw,relatime,cpu,cpuacct"),
        (str(tmp_path / "pids"), "cgroup", "rw,relatime,pids"),
        (str(tmp_path / "unified"), "cgroup2", "rw,relatime"),
    ]
    assert pids_parent(mounts, CGROUPS_V1) == tmp_path / "pids" / "jobs"


def test_a_mount_rooted_at_the_runtimes_cgroup_is_that_cgroup(tmp_path: Path) -> None:
    mounts = [(str(tmp_path), "cgroup", "rw,pids")]
    assert pids_parent(mounts, "8:pids:/docker/0123\n") == tmp_path


def test_a_read_only_pids_hierarchy_is_none() -> None:
    assert pids_parent([("/sys/fs/cgroup/pids", "cgroup", "ro,pids")], CGROUPS_V1) is None


def bomb_cgroup_v2_counts_when_it_hands_pids_to_its_children(tmp_path: Path) -> None:
    own = tmp_path / "svc"
    own.mkdir()
    mounts = [(str(tmp_path), "cgroup2", "rw,nosuid")]
    (own / "cgroup.subtree_control").write_text("memory\n")
    assert pids_parent(mounts, "0::/svc\n") is None
    (own / "cgroup.subtree_control").write_text("memory pids\n")
    assert pids_parent(mounts, "0::/svc\n") == own
