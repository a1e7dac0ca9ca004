"""The etcd call metrics (storage.instrumentation: ``etcd_request_duration_seconds``,
``etcd_requests_total``, ``etcd_request_errors_total``) are the lean kinds, updated on every etcd call
without prometheus_client's lock; ``/metrics`` shows exactly what prometheus_client's Histogram and
Counter with kube's names, help and buckets showed for the same calls (the definitions before)."""

from __future__ import annotations

import asyncio

import pytest
from genericapi.storage import instrumentation
from genericapi.storage.errors import UnavailableError
from genericapi.storage.instrumentation import EtcdInstruments, recorded
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60)


def _reference(registry: CollectorRegistry) -> tuple[Histogram, Counter, Counter]:
    return (Histogram("etcd_request_duration_seconds",
                      "[ALPHA] Etcd request latency in seconds for each operation and object type.",
                      ["operation", "type"], buckets=BUCKETS, registry=registry),
            Counter("etcd_requests_total", "[ALPHA] Etcd request counts for each operation and object type.",
                    ["operation", "type"], registry=registry),
            Counter("etcd_request_errors_total",
                    "[ALPHA] Etcd failed request counts for each operation and object type.",
                    ["operation", "type"], registry=registry))


def _lines(registry: CollectorRegistry, type_: str) -> list[bytes]:
    return [line for line in generate_latest(registry).splitlines()
            if (line.startswith(b"#") or f'type="{type_}"'.encode() in line) and b"_created" not in line]


def test_observations_expose_prometheus_clients_text() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    for metric in (instrumentation.ETCD_LATENCY, instrumentation.ETCD_REQUESTS, instrumentation.ETCD_ERRORS):
        ours.register(metric)
    latency, requests, errors = _reference(theirs)
    instruments = EtcdInstruments()
    calls = [("get", 0.0001, False), ("get", 0.005, False), ("create", 0.0051, False), ("get", 61.0, True),
             ("list", 0.3, False), ("create", 0.0, True)]
    for operation, elapsed, failed in calls:
        instruments.observe(operation, "gadgets.lean.example", elapsed, failed)
        latency.labels(operation, "gadgets.lean.example").observe(elapsed)
        requests.labels(operation, "gadgets.lean.example").inc()
        if failed:
            errors.labels(operation, "gadgets.lean.example").inc()
    mine = _lines(ours, "gadgets.lean.example")
    assert mine == _lines(theirs, "gadgets.lean.example")
    assert b'etcd_request_errors_total{operation="create",type="gadgets.lean.example"} 1.0' in mine


class _Client:
    def __init__(self) -> None:
        self.instruments = EtcdInstruments()
        self.instruments.name_resource(b"/registry/widgets.lean.example/", "widgets.lean.example")

    @recorded("get", "Range")
    async def get(self, key: bytes, fail: bool = False) -> bytes:
        if fail:
            raise UnavailableError("etcd is down")
        return key


def test_a_recorded_call_counts_once_and_a_failure_as_an_error() -> None:
    client = _Client()
    assert asyncio.run(client.get(b"/registry/widgets.lean.example/ns/a")) == b"/registry/widgets.lean.example/ns/a"
    with pytest.raises(UnavailableError):
        asyncio.run(client.get(b"/registry/widgets.lean.example/ns/b", fail=True))
    labels = ("get", "widgets.lean.example")
    assert instrumentation.ETCD_REQUESTS.labels(*labels).value == 2
    assert instrumentation.ETCD_ERRORS.labels(*labels).value == 1
    assert sum(instrumentation.ETCD_LATENCY.labels(*labels).counts) == 2
