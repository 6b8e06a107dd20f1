"""The MCP client against servers no one here wrote: the reference server-everything (npm) over
stdio and over streamable HTTP, and mcp-server-time (PyPI) over stdio. Their tools are found,
governed, called and recorded like any tool; a server that dies mid-call is restarted; a crash
of OwlClaw mid-call leaves the outcome unknown unless the server marks the tool idempotent."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actors.host import AgentHost
from events import Ledger
from events import catalog as ev
from events.run import Run
from owlclaw.agents import HostStatus
from owlclaw.app import load_app
from owlclaw.audit.verify import replay_run
from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.database import Database
from owlclaw.llm.scripted import register_script
from owlclaw.mcp.config import mcp_servers
from owlclaw.mcp.pool import McpPool
from owlclaw.messages import AnswerApproval, Decision, Result, RunResult, Submit
from owlclaw.reports.approvals import pending
from owlclaw.runtime.approvals import ToolArgumentsInvalid
from owlclaw.tools.errors import ToolError
from tests.apps import make_app
from tests.cli import owlclaw as run_owlclaw
from tests.components import missing_component
from tests.waiting import await_for, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVER_INFO = ("mcp-servers/everything", "2.0.0")


@pytest.fixture(scope="module")
def everything() -> str:
    """The server-everything launcher that `make mcp-servers` installs (and mcp-server-time,
    the dev dependency the same tests start beside it)."""
    bin_dir = Path(os.environ.get("OWLCLAW_MCP_BIN", ROOT / ".owlclaw/mcp/node_modules/.bin"))
    launcher = bin_dir / "mcp-server-everything"
    if shutil.which("node") is None:
        missing_component("Node.js (for the reference MCP servers)", "node is not on PATH")
    if not launcher.exists():
        missing_component("@modelcontextprotocol/server-everything", f"no {launcher}")
    if importlib.util.find_spec("mcp_server_time") is None:
        missing_component("mcp-server-time", "not installed (pip install -e '.[dev]')")
    return str(launcher)


def stdio_servers(everything: str, **extra: dict[str, Any]) -> str:
    """owlclaw.toml tables for server-everything and mcp-server-time over stdio."""
    tables = {
        "everything": {"command": everything, "args": ["stdio"], "exclude": ["toggle-subscriber*"]},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        **extra,
    }
    return "".join(f"[mcp.servers.{name}]\n{toml(t)}\n" for name, t in tables.items())


def toml(table: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        return f'"{v}"' if isinstance(v, str) else str(v)

    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


def app(tmp_path: Path, agent_id: str, config: str) -> Path:
    return make_app(tmp_path / agent_id, config=config)


def owlclaw_host(ledger: Ledger, agent_id: str) -> AgentHost:
    return AgentHost(ledger, OwlClawConfig(runtime=RuntimeConfig(models=(f"scripted/{agent_id}",))))


def server_pids(marker: str) -> list[int]:
    """The processes of this test that run ``marker`` (its MCP servers over stdio)."""
    me, found = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if parent == me and marker in cmdline:
            found.append(int(proc.name))
    return found


async def run_to_end(ledger: Ledger, agent_id: str, focus: str = "use the tools") -> RunResult:
    return (await run_on_host(ledger, agent_id, focus))[0]


async def run_on_host(
    ledger: Ledger, agent_id: str, focus: str = "use the tools"
) -> tuple[RunResult, HostStatus]:
    """A run to its end on a host of its own, and the host's status after it."""
    owl = owlclaw_host(ledger, agent_id)
    try:
        run_id = await owl.ask(Submit(agent_id=agent_id, trigger="webhook", focus=focus))
        return await owl.ask(Result(agent_id=agent_id, run_id=run_id)), await owl.status()
    finally:
        await owl.close()


def events_of(ledger: Ledger, run_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(uuid.UUID(run_id))


def by_tool(events: list[ev.LedgerEvent], kind: type[ev.LedgerEvent]) -> dict[str, Any]:
    """The events of ``kind`` by the tool they are about (one each in these tests)."""
    return {e.tool: e for e in events if isinstance(e, kind)}  # type: ignore[attr-defined]


# --- discovery, list_changed, a server that cannot start ------------------------------------


def test_discovery_names_schemas_annotations_and_a_server_that_cannot_start(
    everything: str,
) -> None:
    servers = mcp_servers(
        {
            "mcp": {
                "servers": {
                    "everything": {"command": everything, "args": ["stdio"]},
                    "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
                    "broken": {"command": "/nonexistent/mcp-server", "timeout_s": 5},
                }
            }
        }
    )

    async def discover() -> tuple[dict[str, Any], dict[str, str], int]:
        pool = McpPool()
        try:
            await pool.ready(servers)
            everything_connection = pool.connection("everything", servers["everything"])
            # server-everything registers a tool once the client is initialized and says so
            await await_for(lambda: everything_connection.refreshes >= 1, "tools/list_changed", 30)
            return pool.tools(servers), pool.status(servers), everything_connection.refreshes
        finally:
            await pool.close()

    tools, status, refreshes = asyncio.run(discover())
    assert {
        "everything__echo",
        "everything__get-sum",
        "everything__toggle-simulated-logging",
    } <= set(tools)
    assert {"time__get_current_time", "time__convert_time"} <= set(tools)
    assert not any(name.startswith("broken__") for name in tools)
    echo = tools["everything__echo"].spec
    parameters = echo.function_schema()["function"]["parameters"]
    assert parameters["properties"]["message"]["type"] == "string"
    assert parameters["required"] == ["message"]
    assert echo.idempotent  # readOnlyHint
    assert not tools["everything__toggle-simulated-logging"].spec.idempotent
    assert echo.source is not None
    assert (echo.source.server_name, echo.source.server_version) == SERVER_INFO
    assert tools["time__get_current_time"].spec.source.server_name == "mcp-time"  # type: ignore[union-attr]
    assert status["everything"].startswith("ready (mcp-servers/everything 2.0.0")
    assert "simulate-research-query left out" in status["everything"]  # a task-only tool
    assert status["broken"].startswith("unavailable: FileNotFoundError")
    assert "/nonexistent/mcp-server" in status["broken"]
    assert refreshes >= 1


def test_owlclaw_tools_shows_each_server_ready_with_its_tools_or_why_not(
    fresh_db: Database, tmp_path: Path, everything: str
) -> None:
    broken = {"broken": {"command": "/nonexistent/mcp-server", "timeout_s": 5}}
    with Ledger(fresh_db.url) as ledger:
        ledger.register_agent(
            "shown", str(app(tmp_path, "shown", stdio_servers(everything, **broken)))
        )
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
        "OWLCLAW_SERVER_PORT": str(free_port()),
    }
    shown = run_owlclaw(env, "tools", "shown", "--json", cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    servers = json.loads(shown.stdout)["mcp_servers"]
    assert servers["everything"]["status"].startswith("ready (mcp-servers/everything 2.0.0")
    assert "everything__echo" in servers["everything"]["tools"]
    assert "time__get_current_time" in servers["time"]["tools"]
    assert servers["broken"]["tools"] == []
    assert "unavailable: FileNotFoundError" in servers["broken"]["status"]
    text = run_owlclaw(env, "tools", "shown", cwd=tmp_path, timeout=120)
    assert "MCP server broken: unavailable: FileNotFoundError" in " ".join(text.stdout.split())
    off = run_owlclaw(
        env, "tools", "shown", "--disable", "everything__echo", "--json", cwd=tmp_path, timeout=120
    )
    assert off.returncode == 0, off.stderr  # a server's tool is a tool the operator can switch
    assert json.loads(off.stdout)["disabled"] == ["everything__echo"]


# --- calls through the pipeline ------------------------------------------------------------


def test_a_run_calls_mcp_tools_governed_validated_and_recorded_with_their_provenance(
    ledger: Ledger, tmp_path: Path, everything: str
) -> None:
    broken = {"broken": {"command": "/nonexistent/mcp-server", "timeout_s": 5}}
    governance = (
        '[governance]\ndeny = ["everything__get-env"]\n'
        'ask_if = { "everything__get-sum" = "a > 100" }\n'
        'rate_limits = { "time__get_current_time" = { calls = 1, per_seconds = 3600 } }\n\n'
    )
    config = governance + stdio_servers(everything, **broken)
    ledger.register_agent("mcp-user", str(app(tmp_path, "mcp-user", config)))
    register_script(
        "mcp-user",
        [
            {
                "tool_calls": [
                    {"name": "everything__echo", "arguments": {"message": "hi"}},
                    {"name": "everything__echo", "arguments": {"message": 5}},
                    {"name": "everything__get-env", "arguments": {}},
                    {
                        "name": "everything__get-resource-reference",
                        "arguments": {"resourceId": 0},
                    },
                    {
                        "name": "time__get_current_time",
                        "arguments": {"timezone": "UTC"},
                    },
                    {
                        "name": "time__get_current_time",
                        "arguments": {"timezone": "Europe/Paris"},
                    },
                    {"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}},
                    {"name": "remember", "arguments": {"content": "x", "tags": []}},
                ]
            },
            {"content": "done"},
        ],
    )
    result, host = asyncio.run(run_on_host(ledger, "mcp-user"))
    events = events_of(ledger, result.run_id)
    assert result.status == "completed"
    assert host.mcp_servers["everything"].startswith("ready (mcp-servers/everything")
    assert host.mcp_servers["broken"].startswith("unavailable: FileNotFoundError")
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    assert "everything__echo" in visible.tools and "everything__get-env" not in visible.tools
    requested = by_tool(events, ev.ToolCallRequested)
    assert set(requested) == {
        "everything__echo",
        "everything__get-resource-reference",
        "time__get_current_time",
        "everything__get-sum",  # ask_if "a > 100": a = 2 is not asked about
        "remember",
    }
    echo = requested["everything__echo"]
    assert (echo.server_name, echo.server_version) == SERVER_INFO
    assert len(echo.schema_sha256) == 64
    assert requested["time__get_current_time"].server_name == "mcp-time"
    assert requested["remember"].server_name == ""  # a built-in has no provenance
    succeeded = by_tool(events, ev.ToolCallSucceeded)
    assert succeeded["everything__echo"].result == "Echo: hi"
    assert succeeded["time__get_current_time"].result["structured"]["timezone"] == "UTC"
    assert "remember" in succeeded  # the broken server's absence leaves the other tools working
    [rejected] = by_tool(events, ev.ToolCallRejected).values()
    assert rejected.tool == "everything__echo" and "is not of type 'string'" in rejected.error
    denied = by_tool(events, ev.ToolCallDenied)
    assert set(denied) == {"everything__get-env", "time__get_current_time"}
    assert denied["time__get_current_time"].error_code == "RATE_LIMITED"  # its second call
    [failed] = by_tool(events, ev.ToolCallFailed).values()
    assert failed.tool == "everything__get-resource-reference"
    assert failed.error_code == "TOOL_ERROR" and "Invalid resourceId: 0" in failed.error
    # an audit replay (the servers listed, every call settled from the record) matches
    report = replay_run(ledger, "mcp-user", 1, app=load_app(tmp_path / "mcp-user"))
    assert report.matched, repr(report.differences)


def test_an_image_result_is_kept_as_a_blob_the_ledger_refers_to(
    ledger: Ledger, fresh_db: Database, tmp_path: Path, everything: str
) -> None:
    ledger.register_agent("viewer", str(app(tmp_path, "viewer", stdio_servers(everything))))
    register_script(
        "viewer",
        [
            {"tool_calls": [{"name": "everything__get-tiny-image", "arguments": {}}]},
            {"content": "ok"},
        ],
    )
    result = asyncio.run(run_to_end(ledger, "viewer"))
    assert result.status == "completed"
    told = by_tool(events_of(ledger, result.run_id), ev.ToolCallSucceeded)
    [image] = told["everything__get-tiny-image"].result["content"]
    assert (image["type"], image["mimeType"], image["stored"]) == ("image", "image/png", True)
    media_type, png = ledger.blobs.get(image["sha256"])
    assert media_type == "image/png" and png.startswith(b"\x89PNG") and len(png) == image["bytes"]
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
    }
    target = tmp_path / "image.png"
    read = run_owlclaw(env, "blob", image["sha256"], "--out", str(target), cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    assert target.read_bytes() == png
    # an audit replay settles the call from the record: it needs no blob
    with psycopg.connect(fresh_db.url, autocommit=True) as conn:
        conn.execute("DELETE FROM ledger_blobs")
    report = replay_run(ledger, "viewer", 1, app=load_app(tmp_path / "viewer"))
    assert report.matched, repr(report.differences)


def test_an_mcp_call_the_governance_asks_about_waits_for_the_answer(
    ledger: Ledger, tmp_path: Path, everything: str
) -> None:
    config = '[governance]\nask = ["everything__echo"]\n\n' + stdio_servers(everything)
    ledger.register_agent("mcp-asker", str(app(tmp_path, "mcp-asker", config)))
    echo = {"name": "everything__echo", "arguments": {"message": "approved"}}
    register_script("mcp-asker", [{"tool_calls": [echo]}, {"content": "done"}])

    async def park() -> tuple[str, list[str]]:
        owl = owlclaw_host(ledger, "mcp-asker")
        try:
            run_id = await owl.ask(Submit(agent_id="mcp-asker", trigger="webhook", focus="echo"))
            await await_for(
                lambda: any(isinstance(e, ev.RunParked) for e in events_of(ledger, run_id)),
                "the run to park",
            )
            return run_id, [type(e).__name__ for e in events_of(ledger, run_id)]
        finally:
            await owl.close()

    async def answer_on_a_new_host(run_id: str) -> RunResult:
        """The answer edits the arguments: checked against the server's schema, then used."""
        owl = owlclaw_host(ledger, "mcp-asker")
        try:
            [waiting] = pending(ledger, ["mcp-asker"])
            bad = Decision(
                waiting.approval_id, True, "alice", arguments={"message": 5}, digest=waiting.digest
            )
            with pytest.raises(ToolArgumentsInvalid, match="is not of type 'string'"):
                await owl.ask(AnswerApproval(agent_id="mcp-asker", decision=bad))
            edited = Decision(
                waiting.approval_id,
                True,
                "alice",
                arguments={"message": "edited"},
                digest=waiting.digest,
            )
            await owl.ask(AnswerApproval(agent_id="mcp-asker", decision=edited))
            return await owl.ask(Result(agent_id="mcp-asker", run_id=run_id))
        finally:
            await owl.close()

    run_id, parked_kinds = asyncio.run(park())
    assert "ToolCallRequested" not in parked_kinds  # nothing called while it waited
    result = asyncio.run(answer_on_a_new_host(run_id))
    assert result.status == "completed"
    [succeeded] = by_tool(events_of(ledger, run_id), ev.ToolCallSucceeded).values()
    assert succeeded.result == "Echo: edited"


def test_a_call_past_its_time_limit_times_out_and_the_connection_serves_on(
    ledger: Ledger, tmp_path: Path, everything: str
) -> None:
    config = stdio_servers(everything).replace(
        'args = ["stdio"]', 'args = ["stdio"]\ntimeout_s = 1', 1
    )
    ledger.register_agent("mcp-slow", str(app(tmp_path, "mcp-slow", config)))
    slow = {"name": "everything__trigger-long-running-operation", "arguments": {"duration": 20}}
    echo = {"name": "everything__echo", "arguments": {"message": "still here"}}
    register_script("mcp-slow", [{"tool_calls": [slow, echo]}, {"content": "done"}])
    result = asyncio.run(run_to_end(ledger, "mcp-slow"))
    events = events_of(ledger, result.run_id)
    assert result.status == "completed"
    [timed_out] = by_tool(events, ev.ToolCallTimedOut).values()
    assert timed_out.tool == slow["name"] and timed_out.timeout_s == 1
    assert by_tool(events, ev.ToolCallSucceeded)[echo["name"]].result == "Echo: still here"


# --- streamable HTTP -----------------------------------------------------------------------


class HttpEverything:
    """server-everything serving streamable HTTP on a loopback port; stopped and started again
    on the same port to fail and restore the session."""

    def __init__(self, launcher: str):
        self.launcher = launcher
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = server = subprocess.Popen(
            [self.launcher, "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: _listening(self.port) or server.poll() is not None, "it to listen", 30)
        assert server.poll() is None, "server-everything (streamableHttp) exited"

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def http_everything(everything: str) -> Iterator[HttpEverything]:
    server = HttpEverything(everything)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_streamable_http_server_with_a_header_from_the_environment(
    ledger: Ledger,
    tmp_path: Path,
    http_everything: HttpEverything,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = f"Bearer secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("OWL_TEST_MCP_TOKEN", secret)
    headers = {"Authorization": "OWL_TEST_MCP_TOKEN"}
    config = toml({"url": http_everything.url, "headers_env": headers})
    ledger.register_agent(
        "mcp-http", str(app(tmp_path, "mcp-http", "[mcp.servers.web]\n" + config))
    )
    call = {"name": "web__get-sum", "arguments": {"a": 2, "b": 3}}
    register_script("mcp-http", [{"tool_calls": [call]}, {"content": "done"}])
    result = asyncio.run(run_to_end(ledger, "mcp-http"))
    events = events_of(ledger, result.run_id)
    assert result.status == "completed"
    [succeeded] = by_tool(events, ev.ToolCallSucceeded).values()
    assert "5" in str(succeeded.result)
    assert by_tool(events, ev.ToolCallRequested)["web__get-sum"].server_name == SERVER_INFO[0]
    agent_events = ledger.stream(ledger.load_agent("mcp-http").id)
    assert not any(secret in repr(e) for e in [*events, *agent_events])  # never in the ledger


def test_an_http_session_that_fails_mid_call_is_restored_for_the_next_call(
    http_everything: HttpEverything,
) -> None:
    servers = mcp_servers({"mcp": {"servers": {"web": {"url": http_everything.url}}}})

    async def fail_mid_call() -> tuple[Any, Any, Any]:
        pool = McpPool()
        try:
            await pool.ready(servers)
            connection = pool.connection("web", servers["web"])
            slow = asyncio.create_task(
                connection.call("trigger-long-running-operation", {"duration": 30, "steps": 30}, 60)
            )
            await asyncio.sleep(0.5)  # the call is in flight (it runs 30 s)
            http_everything.kill()
            failed = await slow
            while_down = await connection.call("echo", {"message": "down"}, 5)
            await asyncio.to_thread(http_everything.start)
            after = await connection.call("echo", {"message": "back"}, 30)
            return failed, while_down, after
        finally:
            await pool.close()

    failed, while_down, after = asyncio.run(fail_mid_call())
    assert isinstance(failed, ToolError) and failed.error_code == "MCP_SERVER_UNAVAILABLE"
    assert isinstance(while_down, ToolError) and while_down.error_code == "MCP_SERVER_UNAVAILABLE"
    assert "ConnectError" in while_down.error  # why: nothing listens
    assert not isinstance(after, ToolError) and after.content[0].text == "Echo: back"


# --- a server killed mid-call ----------------------------------------------------------------


def test_a_server_killed_mid_call_gives_a_structured_error_and_is_restarted(
    everything: str,
) -> None:
    servers = mcp_servers({"mcp": {"servers": {"everything": {"command": everything}}}})

    async def kill_mid_call() -> tuple[Any, Any, int]:
        pool = McpPool()
        try:
            await pool.ready(servers)
            connection = pool.connection("everything", servers["everything"])
            [pid] = server_pids("mcp-server-everything")
            slow = asyncio.create_task(
                connection.call("trigger-long-running-operation", {"duration": 30, "steps": 30}, 60)
            )
            await asyncio.sleep(0.5)  # the call is in flight (it runs 30 s)
            os.kill(pid, signal.SIGKILL)
            killed = await slow
            after = await connection.call("echo", {"message": "back"}, 30)
            return killed, after, connection.starts
        finally:
            await pool.close()

    killed, after, starts = asyncio.run(kill_mid_call())
    assert isinstance(killed, ToolError)
    assert killed.error_code == "MCP_SERVER_UNAVAILABLE" and killed.retryable
    assert "everything" in killed.error
    assert not isinstance(after, ToolError) and after.content[0].text == "Echo: back"
    assert starts == 2  # restarted once


# --- a crash of OwlClaw mid-call ---------------------------------------------------------------


def interrupted_run(
    ledger: Ledger, agent_id: str, app_dir: Path, tool: str, arguments: dict[str, Any]
) -> str:
    """What a process leaves behind when it dies right after committing a tool request."""
    agent = ledger.register_agent(agent_id, str(app_dir))
    queued = agent.queue_run("webhook", focus="interrupted")
    run = Run.start(agent_id, queued)
    run.record(ev.VisibleToolsResolved, tools=[tool])
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    run.record(
        ev.LLMResponded,
        model=f"scripted/{agent_id}",
        message={"role": "assistant", "content": None, "tool_calls": [call]},
        usage={"total_tokens": 10},
    )
    run.record(ev.ToolCallRequested, call_id="c1", tool=tool, arguments=arguments)
    ledger.append(agent, run)
    return str(queued.run_id)


@pytest.mark.parametrize(
    ("agent_id", "tool", "arguments", "runs_again"),
    [
        ("mcp-crash-echo", "everything__echo", {"message": "again"}, True),  # readOnlyHint
        ("mcp-crash-toggle", "everything__toggle-simulated-logging", {}, False),
    ],
)
def test_a_crash_mid_call_leaves_the_outcome_unknown_unless_the_tool_is_idempotent(
    ledger: Ledger,
    tmp_path: Path,
    everything: str,
    agent_id: str,
    tool: str,
    arguments: dict[str, Any],
    runs_again: bool,
) -> None:
    app_dir = app(tmp_path, agent_id, stdio_servers(everything))
    run_id = interrupted_run(ledger, agent_id, app_dir, tool, arguments)
    register_script(agent_id, [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {}])

    async def resume() -> RunResult:
        owl = owlclaw_host(ledger, agent_id)
        try:  # activation resumes the interrupted run first
            return await owl.ask(Result(agent_id=agent_id, run_id=run_id))
        finally:
            await owl.close()

    result = asyncio.run(resume())
    events = events_of(ledger, run_id)
    kinds = [type(e).__name__ for e in events]
    assert result.status == "completed"
    assert kinds.count("ToolOutcomeUnknown") == 1 and kinds.count("LLMResponded") == 2
    assert kinds.count("ToolCallRequested") == 1  # the write-ahead request, not a second one
    succeeded = by_tool(events, ev.ToolCallSucceeded)
    if runs_again:
        assert succeeded[tool].result == "Echo: again"
    else:
        assert succeeded == {}  # never a silent second call
