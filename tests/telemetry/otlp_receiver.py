"""A local OTLP/HTTP receiver: what the gateway and the workers export, decoded with
``opentelemetry-proto`` (the collector's own message types), for tests to look at.

It answers every POST 200: ``/v1/traces`` are decoded and kept as :class:`Span` s,
``/v1/metrics`` counted (their names kept), anything else ignored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]
    status_code: int

    def event(self, name: str) -> dict[str, Any] | None:
        return next((attrs for event, attrs in self.events if event == name), None)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items if isinstance(kv, KeyValue)}


@dataclass
class OtlpReceiver:
    spans: list[Span] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    posts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver._take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def _take(self, path: str, body: bytes) -> None:
        with self._lock:
            self.posts += 1
        if path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(body)
            spans = []
            for resource_spans in request.resource_spans:
                service = _attributes(resource_spans.resource.attributes).get("service.name", "")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        spans.append(
                            Span(
                                service=service,
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                attributes=_attributes(span.attributes),
                                events=[(e.name, _attributes(e.attributes)) for e in span.events],
                                links=[(lk.trace_id.hex(), lk.span_id.hex()) for lk in span.links],
                                status_code=span.status.code,
                            )
                        )
            with self._lock:
                self.spans.extend(spans)
        elif path.endswith("/v1/metrics"):
            metrics = ExportMetricsServiceRequest.FromString(body)
            names = {
                metric.name
                for rm in metrics.resource_metrics
                for sm in rm.scope_metrics
                for metric in sm.metrics
            }
            with self._lock:
                self.metric_names |= names

    def in_trace(self, trace_id: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, found: Callable[[list[Span]], bool], timeout: float = 30.0) -> list[Span]:
        """The spans received, once ``found(spans)`` holds (polled: the exporters send on
        their own schedule); fails after ``timeout`` seconds with what did arrive."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                described = [(s.service, s.name, s.trace_id[:8]) for s in spans]
                raise AssertionError(f"spans received in {timeout}s: {described}")
            time.sleep(0.05)
