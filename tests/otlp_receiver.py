"""A loopback OTLP/HTTP receiver: it keeps the spans an OTLP exporter posts to ``/v1/traces``
(protobuf, gzip or not), decoded with OpenTelemetry's own protobuf classes."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.loopback import serving

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class OtlpSpan:
    name: str
    kind: str
    """SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT, ..."""
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    status: str
    """STATUS_CODE_UNSET, STATUS_CODE_ERROR, ..."""
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[OtlpSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        OtlpSpan(
            name=span.name,
            kind=Span.SpanKind.Name(span.kind),
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            start_ns=span.start_time_unix_nano,
            status=Status.StatusCode.Name(span.status.code),
            attributes={a.key: _value(a.value) for a in span.attributes},
            resource={a.key: _value(a.value) for a in resource.resource.attributes},
            scope=scoped.scope.name,
        )
        for resource in request.resource_spans
        for scoped in resource.scope_spans
        for span in scoped.spans
    ]


class OtlpReceiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[OtlpSpan] = []
        self.content_types: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != TRACES_PATH:
            self._reply(404)
            return
        self.server.content_types.add(self.headers.get("Content-Type", ""))
        self.server.received.extend(decode(body))
        self._reply(200)

    def _reply(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what arrived, not the access log."""


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    with serving(OtlpReceiver(), "otlp-receiver") as server:
        yield server
