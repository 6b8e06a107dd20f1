"""`owlclaw status` shows the server's supervised workers (state, restarts and the last error)
and its hosts' MCP servers."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from rich.console import Console

from owlclaw.agents import HostStatus
from owlclaw.cli import status
from owlclaw.supervisor import WorkerStatus


def test_the_status_table_lists_each_worker_with_its_restarts_and_last_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed_at = datetime(2026, 11, 26, 14, 3, 7, tzinfo=UTC)
    workers = [
        WorkerStatus("timer-worker", restarts=0, started_at=failed_at),
        WorkerStatus(
            "projection:runs",
            state="backing_off",
            restarts=3,
            last_error="OperationalError: connection [refused]",
            last_error_at=failed_at,
        ),
    ]
    report = {
        "server": {
            "url": "http://127.0.0.1:8765",
            "placement": "local",
            "timer_backend": "builtin",
            "hatchet": "not used",
            "workers": msgspec.to_builtins(workers),
            "mcp_servers": {
                "time": "ready (mcp-time 1.0, 2 tools)",
                "broken": "unavailable: FileNotFoundError: /nonexistent [x]",
            },
        },
        "database": {"head": 12},
        "pending_timers": 0,
        "registered_agents": 3,
        "agents": [],
        "projections": [],
    }
    console = Console(record=True, width=200)
    monkeypatch.setattr(status, "out", console)
    status._print_status(report)
    text = console.export_text()
    assert "agents   3 registered" in text
    assert "mcp      broken: unavailable: FileNotFoundError: /nonexistent [x]" in text
    assert "mcp      time: ready (mcp-time 1.0, 2 tools)" in text
    [timer] = [line for line in text.splitlines() if "timer-worker" in line]
    assert "running" in timer and " 0 " in timer
    [runs] = [line for line in text.splitlines() if "projection:runs" in line]
    assert "backing_off" in runs and " 3 " in runs
    assert "2026-11-26T14:03:07 OperationalError: connection [refused]" in runs


def test_hosts_merged_show_a_server_unavailable_if_any_host_cannot_reach_it() -> None:
    def host(**servers: str) -> HostStatus:
        return HostStatus(agents={}, activations=0, passivations=0, mcp_servers=servers)

    merged = HostStatus.merged(
        [
            host(time="ready (mcp-time 1.0, 2 tools)", fs="ready (fs 1.0, 9 tools)"),
            host(time="unavailable: ConnectionError", solo="starting"),
            host(time="ready (mcp-time 1.0, 2 tools)"),
        ]
    )
    assert merged.mcp_servers == {
        "time": "unavailable: ConnectionError",
        "fs": "ready (fs 1.0, 9 tools)",
        "solo": "starting",
    }
