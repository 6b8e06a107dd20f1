"""A loopback HTTP server standing in for LANGFUSE_HOST: it keeps the spans the Langfuse SDK's
OTLP exporter posts to ``/api/public/otel/v1/traces`` (protobuf or JSON, gzip or not) and
answers the project lookup ``get_trace_url`` makes."""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf.json_format import Parse
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from owlclaw import tracing
from tests.loopback import serving

TRACES_PATH = "/api/public/otel/v1/traces"
PROJECT_ID = "project-owlclaw-test"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    scope: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def decode(body: bytes, content_type: str) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    if "json" in content_type:
        Parse(body.decode(), request)
    else:
        request.ParseFromString(body)
    return [
        ReceivedSpan(
            name=span.name,
            scope=scoped.scope.name,
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            start_ns=span.start_time_unix_nano,
            end_ns=span.end_time_unix_nano,
            attributes={a.key: _value(a.value) for a in span.attributes},
        )
        for resource in request.resource_spans
        for scoped in resource.scope_spans
        for span in scoped.spans
    ]


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[ReceivedSpan] = []
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        self.server.paths.append(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != TRACES_PATH:
            self._reply(404, b"")
            return
        self.server.received.extend(decode(body, self.headers.get("Content-Type", "")))
        self._reply(200, b"")

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.path != "/api/public/projects":
            self._reply(404, b"")
            return
        organization = {"id": "org", "name": "org"}
        project = {
            "id": PROJECT_ID,
            "name": "owlclaw",
            "organization": organization,
            "metadata": {},
        }
        self._reply(200, json.dumps({"data": [project]}).encode(), "application/json")

    def _reply(
        self, status: int, body: bytes, content_type: str = "application/x-protobuf"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what arrived, not the access log."""


@contextmanager
def langfuse_receiver() -> Iterator[Receiver]:
    with serving(Receiver(), "langfuse-receiver") as server:
        yield server


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """Langfuse keys for a new project (the SDK keeps one client per public key) pointing at
    the receiver; afterwards the SDK's clients are shut down and tracing is off again."""
    with langfuse_receiver() as receiver:
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", f"pk-lf-{uuid.uuid4().hex}")
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-test")
        monkeypatch.setenv("LANGFUSE_HOST", receiver.url)
        monkeypatch.delenv("LANGFUSE_BASE_URL", raising=False)
        yield receiver
        LangfuseResourceManager.reset()
        monkeypatch.delenv("LANGFUSE_PUBLIC_KEY")
        tracing.enable_langfuse()
