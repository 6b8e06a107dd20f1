"""When the CLI does the work itself: nothing listens at the server's address, or the server is
still starting (it has done nothing yet); and how `owlclaw status` shows a starting server."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rich.console import Console

from owlclaw.bench import free_port
from owlclaw.cli import status
from owlclaw.cli.common import ask_server
from owlclaw.client import ServerClient, ServerRefused
from owlclaw.config import OwlClawConfig, ServerConfig


def config_at(port: int) -> OwlClawConfig:
    return OwlClawConfig(server=ServerConfig(port=port, token="t"))


@dataclass
class Stub:
    port: int
    replies: dict[str, tuple[int, dict[str, Any]]]
    """Path -> the HTTP status and JSON body it is answered with."""


STARTING = (503, {"error": "the service is still starting; try again", "code": "starting"})


@pytest.fixture
def stub() -> Iterator[Stub]:
    """A loopback server answering each path as ``replies`` says (the webhook stands in)."""
    replies: dict[str, tuple[int, dict[str, Any]]] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code, body = replies[self.path.split("?")[0]]
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield Stub(http.server_address[1], replies)
    http.shutdown()
    http.server_close()


def test_nothing_listening_is_no_server_and_nothing_is_asked() -> None:
    asked: list[ServerClient] = []
    assert ask_server(config_at(free_port()), asked.append) is None
    assert asked == []


def test_a_starting_server_leaves_the_work_to_the_cli(stub: Stub) -> None:
    config = config_at(stub.port)
    stub.replies["/agents/a/runs"] = STARTING
    assert ask_server(config, lambda client: client.runs("a", 5)) is None
    stub.replies["/status"] = STARTING
    served = ask_server(config, status._served_status)
    assert served == {
        "server": {"url": f"http://127.0.0.1:{stub.port}", "running": False, "starting": True}
    }
    stub.replies["/status"] = (403, {"error": "needs role viewer on some agent", "code": "x"})
    with pytest.raises(ServerRefused, match="needs role viewer"):
        ask_server(config, status._served_status)  # refused: reported, not read here


def test_status_says_a_server_is_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = Console(file=io.StringIO(), record=True, width=120)
    monkeypatch.setattr(status, "out", shown)
    report: dict[str, Any] = {
        "server": {"url": "http://127.0.0.1:8765", "running": False, "starting": True},
        "database": {"head": 3},
        "pending_timers": 0,
        "registered_agents": 0,
        "agents": [],
        "projections": [],
    }
    status._print_status(report)
    assert "server   starting at http://127.0.0.1:8765" in shown.export_text()
