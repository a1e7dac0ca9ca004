"""The per-request series (``apiserver_request_total``, ``apiserver_request_duration_seconds``,
``apiserver_response_sizes``, ``apiserver_longrunning_requests``, ``apiserver_request_terminations_total``)
are the lean metric kinds now: the same requests recorded through ``genericapi.server.metrics`` give
the ``/metrics`` text that prometheus_client's Counter, Histogram and Gauge gave before (their
definitions as they were at a82bf72 are the reference below: names, HELP, labels and buckets)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from genericapi.server import metrics
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20,
                   30, 45, 60)


class Reference:
    """The request metrics and their recording as a82bf72 had them (prometheus_client's kinds)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "apiserver_request_total",
            "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, "
            "resource, scope, component, and HTTP response code.",
            ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"],
            registry=registry)
        self.latency = Histogram(
            "apiserver_request_duration_seconds",
            "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, "
            "resource, subresource, scope and component.",
            ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"],
            buckets=LATENCY_BUCKETS, registry=registry)
        self.sizes = Histogram(
            "apiserver_response_sizes",
            "[STABLE] Response size distribution in bytes for each group, version, verb, resource, subresource, "
            "scope and component.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component"],
            buckets=(1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9), registry=registry)
        self.longrunning = Gauge(
            "apiserver_longrunning_requests",
            "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, "
            "resource, scope and component. Not all requests are tracked this way.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component"], registry=registry)
        self.terminations = Counter(
            "apiserver_request_terminations_total",
            "[ALPHA] Number of requests which apiserver terminated in self-defense.",
            ["verb", "group", "version", "resource", "subresource", "scope", "component", "code"],
            registry=registry)

    def record_request(self, labels: metrics.RequestLabels, code: int, elapsed: float, size: int) -> None:
        self.requests.labels(*labels, str(code)).inc()
        self.latency.labels(*labels).observe(elapsed)
        if labels[0] in ("GET", "LIST"):
            self.sizes.labels(labels[0], *labels[2:]).observe(size)

    def record_dropped(self, labels: metrics.RequestLabels) -> None:
        self.requests.labels(*labels, "429").inc()
        self.terminations.labels(labels[0], *labels[2:], "429").inc()


GET = ("GET", "", "", "v1", "configmaps", "", "resource", "apiserver")
LIST = ("LIST", "", "apps", "v1", "deployments", "", "namespace", "apiserver")
CREATE = ("POST", "All", "", "v1", "configmaps", "", "resource", "apiserver")
PATCH = ("APPLY", "invalid", "", "v1", "pods", "status", "resource", "apiserver")
WATCH = ("WATCH", "", "", "v1", "pods", "", "cluster", "apiserver")
CONNECT = ("CONNECT", "", "", "v1", "pods", "exec", "resource", "apiserver")
HEALTH = ("GET", "", "", "", "", "/readyz", "", "")
ODD = ("GET", "", "example.com", "v1", 'we"ird\\name\n', "", "resource", "apiserver")

REQUESTS = [  # labels, code, seconds, response bytes
    (GET, 200, 0.0, 0), (GET, 200, 0.005, 418), (GET, 404, 0.0051, 230), (GET, 200, 60.0, 1000),
    (GET, 200, 61.0, 1001), (LIST, 200, 0.1, 10 ** 6), (LIST, 200, 1e-7, 10 ** 9 + 1), (LIST, 410, 0.2, 0),
    (CREATE, 201, 0.0249, 512), (CREATE, 409, 0.025, 300), (CREATE, 500, 2.0, 90), (PATCH, 422, 0.4, 700),
    (HEALTH, 200, 0.001, 2), (HEALTH, 500, 0.002, 0), (ODD, 200, 0.3, 12345), (WATCH, 200, 120.0, 0),
    (CONNECT, 101, 3.5, 0),
]


@pytest.fixture
def lean() -> Iterator[CollectorRegistry]:
    """The module's collectors with nothing recorded yet (other tests of this process may have)."""
    saved = [(m, m.children) for m in (metrics.REQUESTS, metrics.LATENCY, metrics.RESPONSE_SIZES,
                                        metrics.LONGRUNNING, metrics.TERMINATIONS)]
    saved_cache = metrics._children.copy()
    for m, _ in saved:
        m.children = {}
    metrics._children.clear()
    registry = CollectorRegistry(auto_describe=True)
    for m, _ in saved:
        registry.register(m)
    try:
        yield registry
    finally:
        for m, children in saved:
            m.children = children
        metrics._children.clear()
        metrics._children.update(saved_cache)


def test_request_metrics_text_is_what_prometheus_clients_kinds_gave(lean: CollectorRegistry) -> None:
    theirs = CollectorRegistry()
    reference = Reference(theirs)
    for _ in range(2):  # the second round goes through the cached children
        for labels, code, elapsed, size in REQUESTS:
            metrics.record_request(labels, code, elapsed, size)
            reference.record_request(labels, code, elapsed, size)
    for labels in (LIST, CREATE, GET):
        metrics.record_dropped(labels)
        reference.record_dropped(labels)
    for labels, times in ((WATCH, 3), (CONNECT, 1)):
        for _ in range(times):
            metrics.longrunning(labels).inc()
            reference.longrunning.labels(labels[0], *labels[2:]).inc()
    metrics.longrunning(WATCH).dec()
    reference.longrunning.labels(WATCH[0], *WATCH[2:]).dec()
    ours = generate_latest(lean)
    assert ours == generate_latest(theirs)
    assert b'apiserver_request_total{code="429",component="apiserver",dry_run="",group="apps"' in ours
    assert b'apiserver_response_sizes_bucket{component="apiserver",group="apps",le="1e+09"' in ours
    assert b'apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",' \
           b'subresource="",verb="WATCH",version="v1"} 2.0' in ours


def test_nothing_recorded_is_the_same_text(lean: CollectorRegistry) -> None:
    theirs = CollectorRegistry()
    Reference(theirs)
    assert generate_latest(lean) == generate_latest(theirs)


def test_a_request_counted_once_per_call_and_sized_only_for_reads(lean: CollectorRegistry) -> None:
    metrics.record_request(CREATE, 201, 0.01, 999)
    metrics.record_request(CREATE, 201, 0.01, 999)
    metrics.record_request(GET, 200, 0.01, 999)
    assert metrics.REQUESTS.labels(*CREATE, "201").value == 2
    assert sum(metrics.LATENCY.labels(*CREATE).counts) == 2
    assert metrics.RESPONSE_SIZES.children.keys() == {(GET[0], *GET[2:])}
