"""The tool pack on the real ledger: opt-in per agent, governed like every tool, bounded and
recorded — workspace files, their refusals, and exec (which asks for approval by default)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import load_app
from owlclaw.runtime.agent_runtime import AgentRuntime
from projections import Outbox, ProjectionRunner
from tests.apps import make_app
from tests.components import require_bwrap
from tests.scripted import call, play, run_events
from tests.web_fakes import Server, serving
from tests.webhooks import Receiver

pytestmark = pytest.mark.integration


def runtime(ledger: Ledger, tmp_path: Path, agent_id: str, config: str) -> AgentRuntime:
    root = make_app(tmp_path / agent_id, config=config)
    return AgentRuntime(
        ledger, agent_id, models=["x"], app=load_app(root), workspaces=tmp_path / "workspaces"
    )


def outcomes(events: list[ev.LedgerEvent]) -> list[tuple[str, str, object]]:
    """(tool, outcome, result or error code) of each call, in order."""
    seen: list[tuple[str, str, object]] = []
    for e in events:
        if isinstance(e, ev.ToolCallSucceeded):
            seen.append((e.tool, "ok", e.result))
        elif isinstance(e, ev.ToolCallFailed):
            seen.append((e.tool, "failed", e.error_code))
    return seen


def test_files_and_exec_recorded_with_every_refusal(ledger: Ledger, tmp_path: Path) -> None:
    require_bwrap()
    agent = runtime(
        ledger,
        tmp_path,
        "clerk",
        '[tools]\nenable = ["files", "exec"]\n[tools.exec]\nask = false\n',
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (tmp_path / "workspaces" / "clerk").mkdir(parents=True)
    (tmp_path / "workspaces" / "clerk" / "link").symlink_to(outside)
    result = play(
        agent,
        [
            {"tool_calls": [call("write_file", path="notes/a.txt", content="hello world\n")]},
            {
                "tool_calls": [
                    call("edit_file", path="notes/a.txt", old_text="world", new_text="there")
                ]
            },
            {"tool_calls": [call("read_file", path="notes/a.txt")]},
            {"tool_calls": [call("read_file", path="../../outside/secret.txt")]},
            {"tool_calls": [call("read_file", path="link/secret.txt")]},
            {"tool_calls": [call("exec", command="cat notes/a.txt")]},
            {"tool_calls": [call("exec", command="rm -rf notes")]},
            {"tool_calls": [call("exec", command="yes | head -c 100000")]},
            {"tool_calls": [call("exec", command="sleep 30", timeout_s=0.5)]},
            {"content": "done"},
        ],
    )
    assert result.status == "completed"
    events = run_events(ledger, result)
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    assert {"read_file", "write_file", "edit_file", "list_dir", "exec"} <= set(visible.tools)
    seen = outcomes(events)
    assert seen[0] == (
        "write_file",
        "ok",
        {
            "path": "notes/a.txt",
            "bytes": 12,
            "sha256": hashlib.sha256(b"hello world\n").hexdigest(),
            "created": True,
        },
    )
    edited = seen[1][2]
    assert isinstance(edited, dict)
    assert edited["sha256"] == hashlib.sha256(b"hello there\n").hexdigest()
    read = seen[2][2]
    assert isinstance(read, dict) and read["content"] == "hello there\n"
    assert seen[3:5] == [
        ("read_file", "failed", "PATH_OUTSIDE_WORKSPACE"),
        ("read_file", "failed", "PATH_OUTSIDE_WORKSPACE"),
    ]
    assert seen[5] == ("exec", "ok", {"exit_code": 0, "stdout": "hello there\n", "stderr": ""})
    assert seen[6] == ("exec", "failed", "COMMAND_DENIED")
    capped = seen[7][2]
    assert isinstance(capped, dict) and capped["stdout"].endswith("[... 34464 more bytes not kept]")
    assert seen[8] == ("exec", "failed", "EXEC_TIMEOUT")
    assert (tmp_path / "workspaces" / "clerk" / "notes" / "a.txt").read_text() == "hello there\n"


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serving(Server())


def test_web_fetch_and_search_recorded_with_the_ssrf_refusals(
    ledger: Ledger, tmp_path: Path, server: Server
) -> None:
    agent = runtime(
        ledger,
        tmp_path,
        "browser",
        '[tools]\nenable = ["web"]\n[tools.web]\nallow_hosts = ["127.0.0.1"]\n'
        f'search_url = "{server.base}"\n',
    )
    result = play(
        agent,
        [
            {"tool_calls": [call("web_fetch", url=f"{server.base}/redirect")]},
            {"tool_calls": [call("web_fetch", url=f"{server.base}/to-metadata")]},
            {"tool_calls": [call("web_fetch", url="http://10.0.0.1/")]},
            {"tool_calls": [call("web_search", query="owls")]},
            {"content": "done"},
        ],
    )
    seen = outcomes(run_events(ledger, result))
    fetched = seen[0][2]
    assert isinstance(fetched, dict)
    assert fetched["url"] == f"{server.base}/page" and "Barn owl" in fetched["text"]
    assert fetched["content_type"] == "text/html"
    assert seen[1] == ("web_fetch", "failed", "URL_REFUSED")
    assert seen[2] == ("web_fetch", "failed", "URL_REFUSED")
    searched = seen[3][2]
    assert isinstance(searched, dict) and searched["count"] == 3
    assert server.paths() == ["/redirect", "/page", "/to-metadata", "/search"]


def test_a_name_that_resolves_to_loopback_is_refused_without_the_allowance(
    ledger: Ledger, tmp_path: Path, server: Server
) -> None:
    agent = runtime(ledger, tmp_path, "outward", '[tools]\nenable = ["web_fetch"]\n')
    url = f"http://localhost:{server.port}/page"
    result = play(agent, [{"tool_calls": [call("web_fetch", url=url)]}, {"content": "ok"}])
    [failed] = [e for e in run_events(ledger, result) if isinstance(e, ev.ToolCallFailed)]
    assert failed.error_code == "URL_REFUSED" and "localhost resolves to loopback" in failed.error
    assert server.paths() == []  # refused after DNS, before any connection


def test_pack_tools_are_invisible_unless_enabled(ledger: Ledger, tmp_path: Path) -> None:
    agent = runtime(ledger, tmp_path, "plain", "[agent]\n")
    result = play(agent, [{"tool_calls": [call("exec", command="ls")]}, {"content": "ok"}])
    events = run_events(ledger, result)
    [visible] = [e for e in events if isinstance(e, ev.VisibleToolsResolved)]
    assert not {"read_file", "write_file", "edit_file", "list_dir", "exec"} & set(visible.tools)
    assert not any(isinstance(e, ev.ToolCallSucceeded) for e in events)


def test_exec_waits_for_approval_by_default(ledger: Ledger, tmp_path: Path) -> None:
    agent = runtime(ledger, tmp_path, "careful", '[tools]\nenable = ["exec"]\n')
    result = play(agent, [{"tool_calls": [call("exec", command="ls")]}, {"content": "ok"}])
    assert result.status == "parked"
    [request] = [
        e
        for e in ledger.stream(ledger.load_agent("careful").id)
        if isinstance(e, ev.ApprovalRequested)
    ]
    assert request.tool == "exec" and request.arguments["command"] == "ls"
    assert request.reason == "ask_if: True"


def test_send_message_from_a_run_is_delivered_by_the_outbox(
    ledger: Ledger, tmp_path: Path, receiver: Receiver
) -> None:
    agent = runtime(
        ledger,
        tmp_path,
        "herald",
        f'[tools]\nenable = ["send_message"]\n[tools.channels.ops]\nurl = "{receiver.url}"\n',
    )
    result = play(
        agent,
        [
            {"tool_calls": [call("send_message", channel="ops", text="deploy finished")]},
            {"tool_calls": [call("send_message", channel="pager", text="x")]},
            {"content": "told them"},
        ],
    )
    seen = outcomes(run_events(ledger, result))
    queued = seen[0][2]
    assert isinstance(queued, dict) and queued["queued"] is True
    assert seen[1] == ("send_message", "failed", "UNKNOWN_CHANNEL")
    view = Outbox(ledger)
    view.create_table()
    ProjectionRunner(ledger, view).catch_up()
    [(key, _, body)] = receiver.received
    assert key == queued["message_id"] and body["text"] == "deploy finished"
    assert body["run_id"] == result.run_id
