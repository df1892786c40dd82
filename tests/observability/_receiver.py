"""An OTLP/HTTP receiver on loopback: decodes what the SDK posts with opentelemetry-proto's classes."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

_KINDS: dict[str, tuple[type[Message], type[Message]]] = {
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind)


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class Received:
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)

    def log_records(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, record) of every log record, in arrival order."""
        return [
            (attributes_of(resource.resource.attributes), record)
            for request in self.logs
            for resource in request.resource_logs
            for scope in resource.scope_logs
            for record in scope.log_records
        ]

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        return [
            (attributes_of(resource.resource.attributes), span)
            for request in self.traces
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


class OtlpReceiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.received = Received()
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: predicate(self.received), timeout)


class _Handler(BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        kinds = _KINDS.get(self.path)
        if kinds is None or self.headers.get("Content-Type") != "application/x-protobuf":
            with self.server.lock:
                self.server.received.bad.append(f"{self.path} {self.headers.get('Content-Type')}")
            self.send_error(404)
            return
        request_type, response_type = kinds
        request = request_type()
        try:
            request.ParseFromString(body)  # a real parse: a malformed body is refused
        except DecodeError as exc:
            with self.server.lock:
                self.server.received.bad.append(f"{self.path} {exc}")
            self.send_error(400)
            return
        with self.server.arrived:
            received = self.server.received
            received.raw.append(body)
            received.headers.append({key.lower(): value for key, value in self.headers.items()})
            getattr(received, self.path.rsplit("/", 1)[1]).append(request)
            self.server.arrived.notify_all()
        answer = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
