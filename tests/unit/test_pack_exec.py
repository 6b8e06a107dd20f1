"""exec in the workspace: its result, its output cap, its time limit (the whole process group
is killed), its minimal environment, and a denied pattern that never runs."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any, cast

import msgspec
import psutil
import pytest

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.shell import ExecConfig, exec_tools
from owlclaw.tools.tool import RunScope, ToolContext
from tests.components import require_bwrap
from tests.waiting import wait_for

AGENT = "sheller"


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def run(root: Path, command: str, config: ExecConfig | None = None, **more: Any) -> Any:
    tool = exec_tools(root, config or ExecConfig())["exec"]
    params = tool.spec.parse(msgspec.json.encode({"command": command, **more}))
    assert not isinstance(params, ToolError), params
    ctx = ToolContext(AGENT, uuid.uuid4(), "c1", "k", logging.getLogger("t"), cast(RunScope, None))
    return asyncio.run(tool.execute(params, ctx))


def test_exit_code_stdout_and_stderr_in_the_workspace(tmp_path: Path) -> None:
    result = run(tmp_path, "pwd; echo oops >&2; exit 3")
    workspace = (tmp_path / AGENT).resolve()
    assert result == {"exit_code": 3, "stdout": f"{workspace}\n", "stderr": "oops\n"}


def test_output_beyond_the_cap_is_counted_not_kept(tmp_path: Path) -> None:
    result = run(tmp_path, "yes x | head -c 5000", ExecConfig(output_bytes=1000))
    assert result["stdout"].startswith("x\nx\n" * 250)
    assert result["stdout"].endswith("[... 4000 more bytes not kept]")


def test_a_command_past_its_time_limit_is_killed_with_its_children(tmp_path: Path) -> None:
    """The command starts a child in the background, then outlasts its limit (3 s: time for a
    loaded machine to start the shell and run its first lines, far less than the sleeps). The
    sleeps hold no pipe of the shell's: a child left alive would not hold up the call itself.
    The child is found by its own duration (inside the sandbox its pid is not the host's)."""
    quiet = ">/dev/null 2>&1"
    marker = f"120.{uuid.uuid4().int % 10**9}"
    command = f"echo started; sleep {marker} {quiet} & sleep 120 {quiet}"
    result = run(tmp_path, command, timeout_s=3)
    assert isinstance(result, ToolError) and result.error_code == "EXEC_TIMEOUT"
    assert result.kind == "timeout" and "started" in result.error
    wait_for(lambda: not sleeping(marker), "the backgrounded child to die with the group", 30)


def sleeping(duration: str) -> bool:
    """A live ``sleep <duration>`` process exists."""
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["cmdline"] == ["sleep", duration]:
            return bool(process.info["status"] != psutil.STATUS_ZOMBIE)
    return False


def test_environment_is_minimal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("SHARED_SETTING", "visible")
    result = run(tmp_path, "env", ExecConfig(env=("SHARED_SETTING",)))
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines()}
    assert "OPENAI_API_KEY" not in names and "SHARED_SETTING=visible" in result["stdout"]
    assert f"HOME={(tmp_path / AGENT).resolve()}" in result["stdout"]


def test_a_denied_pattern_never_runs(tmp_path: Path) -> None:
    (tmp_path / AGENT / "keep").mkdir(parents=True)
    result = run(tmp_path, "rm -rf keep")
    assert isinstance(result, ToolError) and result.error_code == "COMMAND_DENIED"
    assert "rm -r" in result.error and (tmp_path / AGENT / "keep").is_dir()


def test_exec_asks_for_approval_unless_the_app_says_otherwise(tmp_path: Path) -> None:
    assert exec_tools(tmp_path, ExecConfig())["exec"].spec.ask_if == "True"
    assert exec_tools(tmp_path, ExecConfig(ask=False))["exec"].spec.ask_if is None
