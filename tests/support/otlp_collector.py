"""A small OTLP trace collector for tests: the real ``opentelemetry.proto.collector.trace.v1``
TraceService over gRPC (what kube's and the chain's OTLP exporters speak), keeping every span it
receives with its resource's attributes, so a test can assert what one trace holds."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@dataclass
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    links: list[tuple[str, str]] = field(default_factory=list)
    status_code: int = 0

    @property
    def component(self) -> str:
        """Which service of the chain sent it (resource attribute ``k8s.component``)."""
        return str(self.resource.get("k8s.component", ""))


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, collector: OTLPCollector) -> None:
        self.collector = collector

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,  # the gRPC method name
               context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        received: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(ReceivedSpan(
                        span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name, span.kind,
                        {a.key: _value(a.value) for a in span.attributes}, resource,
                        [(link.trace_id.hex(), link.span_id.hex()) for link in span.links], span.status.code))
        with self.collector.lock:
            self.collector.spans.extend(received)
            self.collector.requests += 1
        return trace_service_pb2.ExportTraceServiceResponse()


class OTLPCollector:
    """Listens on 127.0.0.1 (a free port); ``endpoint`` is what a TracingConfiguration names."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for_trace(self, trace_id: str, done: Any, timeout: float = 40.0) -> list[ReceivedSpan]:
        """The spans of ``trace_id`` once ``done(spans)`` holds (each process exports in batches every
        5 s, as kube's batch span processor), or what arrived by ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.trace(trace_id)
            if done(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)

    def stop(self) -> None:
        self.server.stop(grace=None)
