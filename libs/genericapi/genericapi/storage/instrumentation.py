"""What every etcd call reports: kube's ``etcd_request_duration_seconds`` (operation, type) and, when
tracing is configured, one client span per call, named as kube's otelgrpc-instrumented etcd client
names it (``etcdserverpb.KV/Range``, ``etcdserverpb.KV/Txn``) with kube's store attributes (``key``,
``resource``).

The etcd client knows keys, not resources: a store names the key prefix of its resource once
(``name_resource``), and a call finds its ``type`` label by looking up the key's leading segments.
With tracing off the cost per call is one ``perf_counter`` pair, one dict lookup and three additions:
the series are the lean kinds (genericapi.leanmetrics), exposed as prometheus_client's Histogram and
Counter are, without their lock and label validation on every etcd call.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from genericapi.leanmetrics import LeanCounter, LeanHistogram, LeanValue

from .errors import TooOldRevisionError, UnavailableError

ETCD_LATENCY = LeanHistogram(
    "etcd_request_duration_seconds",
    "[ALPHA] Etcd request latency in seconds for each operation and object type.",
    ("operation", "type"),
    buckets=(0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45,
             60),
)
ETCD_REQUESTS = LeanCounter(
    "etcd_requests_total", "[ALPHA] Etcd request counts for each operation and object type.",
    ("operation", "type"))
ETCD_ERRORS = LeanCounter(
    "etcd_request_errors_total", "[ALPHA] Etcd failed request counts for each operation and object type.",
    ("operation", "type"))

#: Failures of etcd itself (kube counts the error its etcd client returned); a failed precondition
#: (exists, conflict, not found) is an answer, not an error.
_ERRORS = (UnavailableError, TooOldRevisionError, TimeoutError, OSError)


class EtcdInstruments:
    """Per-client state: which resource a key prefix holds, and the tracer (None: tracing off)."""

    def __init__(self) -> None:
        self._types: dict[bytes, str] = {}
        self._children: dict[tuple[str, str], tuple[LeanHistogram.Child, LeanValue]] = {}
        #: An OpenTelemetry tracer, set by the server's tracing set-up; None keeps calls untraced.
        self.tracer: trace.Tracer | None = None

    def name_resource(self, prefix: bytes, resource: str) -> None:
        """Keys under ``prefix`` (``/registry/pods/``) are ``resource`` (kube's GroupResource string)."""
        self._types[prefix if prefix.endswith(b"/") else prefix + b"/"] = resource

    def resource_of(self, key: bytes) -> str:
        types = self._types
        end = key.find(b"/", 1)
        while end != -1:
            found = types.get(key[:end + 1])
            if found is not None:
                return found
            end = key.find(b"/", end + 1)
        return ""

    def observe(self, operation: str, resource: str, elapsed: float, failed: bool) -> None:
        children = self._children.get((operation, resource))
        if children is None:
            children = self._children[(operation, resource)] = (
                ETCD_LATENCY.labels(operation, resource), ETCD_REQUESTS.labels(operation, resource))
        children[0].observe(elapsed)
        children[1].value += 1
        if failed:
            ETCD_ERRORS.labels(operation, resource).inc()


class Instrumented(Protocol):
    instruments: EtcdInstruments


P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=Instrumented)


def recorded(operation: str, rpc_method: str) -> Callable[
        [Callable[Concatenate[C, bytes, P], Awaitable[R]]], Callable[Concatenate[C, bytes, P], Awaitable[R]]]:
    """Record an EtcdClient method whose first argument is the key: kube's ``operation`` label, and
    the etcd RPC it issues (``Range``, ``Txn``, ``Put``, ``DeleteRange``) for the span's name."""
    span_name = f"etcdserverpb.KV/{rpc_method}"

    def wrap(fn: Callable[Concatenate[C, bytes, P], Awaitable[R]]) -> Callable[Concatenate[C, bytes, P], Awaitable[R]]:
        @functools.wraps(fn)
        async def call(self: C, key: bytes, *args: P.args, **kwargs: P.kwargs) -> R:
            instruments = self.instruments
            resource = instruments.resource_of(key)
            started = time.perf_counter()
            failed = False
            try:
                if instruments.tracer is None:
                    return await fn(self, key, *args, **kwargs)
                with instruments.tracer.start_as_current_span(
                        span_name, kind=SpanKind.CLIENT, record_exception=False, set_status_on_exception=False,
                        attributes=_span_attributes(rpc_method, key, resource)) as span:
                    try:
                        result = await fn(self, key, *args, **kwargs)
                    except _ERRORS as err:
                        span.set_status(Status(StatusCode.ERROR, str(err)))
                        span.record_exception(err)
                        raise
                    span.set_attribute("rpc.grpc.status_code", 0)
                    return result
            except _ERRORS:
                failed = True
                raise
            finally:
                instruments.observe(operation, resource, time.perf_counter() - started, failed)
        return call
    return wrap


def _span_attributes(rpc_method: str, key: bytes, resource: str) -> dict[str, Any]:
    return {"rpc.system": "grpc", "rpc.service": "etcdserverpb.KV", "rpc.method": rpc_method,
            "key": key.decode("utf-8", "replace"), "resource": resource}
