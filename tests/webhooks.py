"""A loopback webhook receiver that counts deliveries per idempotency key."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Receiver:
    """A loopback webhook that answers the statuses it is given (then 200), and counts the
    deliveries it accepted per idempotency key, as a deduplicating receiver would."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.accepted: Counter[str] = Counter()
        self.hold_first = False
        """Keep the first request unanswered (the sender dies inside its POST)."""
        self.holding = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                receiver.received.append((key, dict(self.headers), body))
                if receiver.hold_first and not receiver.holding.is_set():
                    receiver.holding.set()
                    receiver.release.wait(60)
                    return
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if status < 300:
                    receiver.accepted[key] += 1
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/messages"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.release.set()
    receiver.server.shutdown()
