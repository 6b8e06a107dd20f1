"""A loopback HTTP server with canned routes, standing in for web pages and search APIs."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

PAGE = (
    b"<html><head><title>Owls</title><style>p {color: red}</style>"
    b"<script>var hidden = 1;</script></head>"
    b"<body><h1>Barn owl</h1><p>Hunts at night, caf\xc3\xa9 included.</p></body></html>"
)


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


ROUTES = {
    "/page": Reply(headers={"Content-Type": "text/html; charset=utf-8"}, body=PAGE),
    "/redirect": Reply(302, {"Location": "/page"}),
    "/big": Reply(headers={"Content-Type": "text/plain"}, body=b"a" * 10_000),
    "/image": Reply(headers={"Content-Type": "image/png"}, body=b"\x89PNG\r\n\x1a\n"),
    "/down": Reply(503, {"Content-Type": "text/plain"}, b"down"),
    "/to-metadata": Reply(302, {"Location": "http://169.254.169.254/latest/meta-data"}),
    "/to-private": Reply(301, {"Location": "http://10.0.0.1/"}),
    "/loop": Reply(302, {"Location": "/loop"}),
    "/search": Reply(
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {
                "query": "owls",
                "results": [
                    {"title": f"Owl {i}", "url": f"https://owls.example/{i}", "content": f"s{i}"}
                    for i in range(3)
                ],
            }
        ).encode(),
    ),
    "/brave": Reply(
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {"web": {"results": [{"title": "Owl", "url": "https://o.example", "description": "d"}]}}
        ).encode(),
    ),
}


class Server:
    """A loopback HTTP server answering ROUTES and recording each request."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.path, dict(self.headers)))
                reply = ROUTES.get(urlsplit(self.path).path, Reply(404))
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.http.socket = tls.wrap_socket(self.http.socket, server_side=True)
        self.port = self.http.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [urlsplit(path).path for path, _ in self.requests]


def serving(server: Server) -> Iterator[Server]:
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    yield server
    server.http.shutdown()
    server.http.server_close()
