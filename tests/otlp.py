"""A tiny OTLP/HTTP trace receiver for tests: decodes what it is sent with opentelemetry-proto's types.

It is a collector's receiving end and nothing more: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` body, answered with an empty ``ExportTraceServiceResponse``.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    name: str
    span_id: str
    parent_id: str
    trace_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    start_ns: int
    end_ns: int
    #: the span's events: (name, attributes)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@dataclass
class OtlpReceiver:
    spans: list[Span] = field(default_factory=list)
    requests: int = 0

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._add(request)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _add(self, request: Any) -> None:
        with self._lock:
            self.requests += 1
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            Span(
                                name=s.name,
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex(),
                                trace_id=s.trace_id.hex(),
                                attributes={a.key: _value(a.value) for a in s.attributes},
                                resource=resource,
                                start_ns=s.start_time_unix_nano,
                                end_ns=s.end_time_unix_nano,
                                events=[
                                    (e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events
                                ],
                            )
                        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, name: str, timeout: float = 20.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [s for s in self.spans if s.name == name]
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(
            f"no span {name!r} received within {timeout}s; got {[s.name for s in self.spans]}"
        )

    def children(self, parent: Span) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.parent_id == parent.span_id]
