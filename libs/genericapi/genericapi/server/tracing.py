"""OpenTelemetry tracing as kube-apiserver does it with ``--tracing-config-file``, across the chain.

kube's WithTracing filter (otelhttp) starts a server span per request, named from the RequestInfo
(``GET /api/v1/namespaces/{:namespace}/pods/{:name}``), continuing the caller's W3C ``traceparent``
only when the caller is trusted (system:masters or system:monitoring; anyone else starts a new
trace linked to theirs). kube has one process; here each hop is a service, so each one runs the
same filter: the gateway's trusts the user as kube does, a member's trusts its link (only the
gateway, or the previous member, reaches it) and every proxy hop passes the current span on as
``traceparent``. etcd calls become client spans below them (storage/instrumentation.py), so one
request is one trace: gateway -> core-api -> extensions-api -> etcd.

Spans leave through the OTLP gRPC exporter (kube's otlptracegrpc: same default endpoint
``localhost:4317``, insecure) from a batch processor thread, with kube's resource attributes
(``service.name`` ``apiserver``). Off unless a file is given: then nothing here is imported on
the hot path, no filter is installed and the etcd client's tracer stays None.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from genericapi.apimachinery.requestinfo import RequestInfo, RequestInfoError, parse_request_info
from genericapi.apimachinery.user import UserInfo

from .tracingconfig import TracingConfig

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)

#: kube's resource ``service.name`` for every apiserver.
SERVICE_NAME = "apiserver"
#: Groups whose ``traceparent`` kube continues (otelhttp's public-endpoint check).
TRUSTED_GROUPS = frozenset({"system:masters", "system:monitoring"})
TRACE_HEADERS = (b"traceparent", b"tracestate")

_PROPAGATOR = TraceContextTextMapPropagator()


class Tracing:
    """One service's tracer provider (batch export over OTLP gRPC) and tracer."""

    def __init__(self, config: TracingConfig, component: str) -> None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased

        self.config = config
        self.component = component
        root = TraceIdRatioBased(config.sampling_ratio) if config.sampling_ratio > 0 else ALWAYS_OFF
        resource = Resource.create({
            "service.name": SERVICE_NAME,
            "service.instance.id": f"{component}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}",
            # Which link of the chain answered: kube has one process, the chain three services.
            "k8s.component": component,
        })
        self.provider: TracerProvider = TracerProvider(sampler=ParentBased(root), resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.collector,
                                                                             insecure=True)))
        self.tracer = self.provider.get_tracer("k8s.io/apiserver/pkg/endpoints/filters")

    def shutdown(self) -> None:
        """Flush what is queued and stop the exporter (blocking: call off the event loop)."""
        self.provider.shutdown()


def load(path: str, component: str) -> Tracing | None:
    """The service's tracing from ``--tracing-config-file`` ("" : off)."""
    if not path:
        return None
    from . import tracingconfig
    config = tracingconfig.load(path)
    log.info("tracing to %s, %d samples per million new traces", config.collector,
             config.sampling_rate_per_million or 0)
    return Tracing(config, component)


class _ScopeHeaders(Getter[Scope]):
    def get(self, carrier: Scope, key: str) -> list[str] | None:
        name = key.encode("latin-1")
        values = [v.decode("latin-1") for k, v in carrier["headers"] if k == name]
        return values or None

    def keys(self, carrier: Scope) -> list[str]:
        return [k.decode("latin-1") for k, _ in carrier["headers"]]


_GETTER = _ScopeHeaders()

#: Decides whether the caller's ``traceparent`` is continued (kube: the user is privileged).
TrustFn = Callable[[Scope], bool]


def trust_privileged(user_of: Callable[[Scope], UserInfo | None]) -> TrustFn:
    """kube's notSystemPrivilegedGroup, inverted: continue the trace of system:masters or
    system:monitoring only."""
    def trusted(scope: Scope) -> bool:
        user = user_of(scope)
        return user is not None and not TRUSTED_GROUPS.isdisjoint(user.groups)
    return trusted


def trust_link(_scope: Scope) -> bool:
    """A member trusts its caller: only the gateway (or the previous member) reaches it."""
    return True


class ServerSpans:
    """kube's WithTracing as an ASGI filter: one SERVER span per HTTP request, current while the
    request is served (so etcd calls and proxy hops see it as parent)."""

    def __init__(self, app: ASGIApp, tracing: Tracing, trust: TrustFn,
                 request_info: Callable[[Scope], RequestInfo | None] | None = None) -> None:
        self.app = app
        self.tracer = tracing.tracer
        self.trust = trust
        self.request_info = request_info or _parse_info

    def begin(self, scope: Scope, info: RequestInfo | None) -> tuple[Span, object]:
        """Start the request's span and make it current: the span and the token ``end`` takes. The
        caller's trace headers stop here (each hop sends its own span on: inject_headers)."""
        remote = _PROPAGATOR.extract(scope, getter=_GETTER)
        remote_span = trace.get_current_span(remote).get_span_context()
        links: list[Link] = []
        parent: otel_context.Context | None = None
        if remote_span.is_valid:
            if self.trust(scope):
                parent = remote
            else:
                links.append(Link(remote_span))
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k not in TRACE_HEADERS]
        span = self.tracer.start_span(span_name(scope, info), context=parent or otel_context.Context(),
                                      kind=SpanKind.SERVER, links=links, attributes=_request_attributes(scope))
        return span, otel_context.attach(trace.set_span_in_context(span))

    @staticmethod
    def end(span: Span, token: object, status: int, err: BaseException | None = None) -> None:
        """End the span with the response's status (0: none was sent) or what the handler raised."""
        if err is not None:
            span.record_exception(err)
            span.set_status(Status(StatusCode.ERROR, type(err).__name__))
        if status:
            span.set_attribute("http.status_code", status)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
        otel_context.detach(token)  # type: ignore[arg-type]
        span.end()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        span, token = self.begin(scope, self.request_info(scope))
        status = 0

        async def traced_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, traced_send)
        except BaseException as err:
            self.end(span, token, status, err)
            raise
        self.end(span, token, status)


def _parse_info(scope: Scope) -> RequestInfo | None:
    try:
        return parse_request_info(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"))
    except RequestInfoError:
        return None


def span_name(scope: Scope, info: RequestInfo | None) -> str:
    """kube's getSpanNameFromRequestInfo: the route with ``{:namespace}`` and ``{:name}``
    placeholders; the bare method for a non-resource request."""
    method: str = scope["method"]
    if info is None or not info.is_resource_request:
        return method
    name = "/" + info.api_prefix
    if info.api_group:
        name += "/" + info.api_group
    name += "/" + info.api_version
    if info.namespace:
        name += "/namespaces/{:namespace}"
    name += "/" + info.resource
    if info.name:
        name += "/{:name}"
    if info.subresource:
        name += "/" + info.subresource
    return f"{method} {name}"


def _request_attributes(scope: Scope) -> dict[str, Any]:
    """otelhttp's server attributes (semconv 1.17) plus kube's ``http.target``."""
    query = scope.get("query_string", b"")
    target = scope["path"] + ("?" + query.decode("latin-1") if query else "")
    attributes: dict[str, Any] = {"http.method": scope["method"], "http.scheme": scope.get("scheme", "http"),
                                  "http.flavor": scope.get("http_version", "1.1"), "http.target": target}
    server = scope.get("server")
    if server and server[0]:
        attributes["net.host.name"] = str(server[0])
        if server[1] is not None:
            attributes["net.host.port"] = int(server[1])
    client = scope.get("client")
    if client:
        attributes["net.sock.peer.addr"] = str(client[0])
    for k, v in scope["headers"]:
        if k == b"user-agent":
            attributes["http.user_agent"] = v.decode("latin-1")
            break
    return attributes


def inject_headers(source: Callable[[Scope], list[tuple[str, str]]]) -> Callable[[Scope], list[tuple[str, str]]]:
    """A proxy's header source that also passes the current span on as ``traceparent``."""
    def headers(scope: Scope) -> list[tuple[str, str]]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return [*source(scope), *carrier.items()]
    return headers
