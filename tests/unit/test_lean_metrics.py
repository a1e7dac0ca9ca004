"""The lean counter and histogram (genericapi.server.metrics) the gateway updates on every request are
exposed exactly as prometheus_client's own Counter and Histogram with the same updates: the same
``/metrics`` text, so kube's dashboards and the gateway's merge of the members' metrics see no
difference. Bad inputs too: values on bucket bounds, below the first, past the last, negative, zero."""

from __future__ import annotations

from genericapi.server.metrics import LeanCounter, LeanGauge, LeanHistogram
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BUCKETS = tuple(0.001 * 2 ** i for i in range(15))
OBSERVED = [0.0, 0.0005, 0.001, 0.0010001, 0.002, 0.003, 1.0, 16.384, 16.385, 1e9, -1.0, 0.004, 0.004]


def test_histogram_exposition_is_prometheus_clients() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("authorization_duration_seconds", "[ALPHA] Authorization duration.", ["result"],
                          buckets=BUCKETS, registry=theirs)
    lean = LeanHistogram("authorization_duration_seconds", "[ALPHA] Authorization duration.", ("result",),
                         buckets=BUCKETS, registry=ours)
    for i, value in enumerate(OBSERVED):
        result = ("allowed", "denied", 'odd "quoted"\\label\n')[i % 3]
        reference.labels(result).observe(value)
        lean.labels(result).observe(value)
    assert generate_latest(ours) == generate_latest(theirs)
    assert b'le="+Inf"' in generate_latest(ours)


def test_counter_exposition_is_prometheus_clients() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Counter("apiserver_audit_level_total", "Counter of policy levels.", ["level"], registry=theirs)
    lean = LeanCounter("apiserver_audit_level_total", "Counter of policy levels.", ("level",), registry=ours)
    for level, times in (("Metadata", 3), ("None", 1), ("RequestResponse", 0)):
        reference.labels(level)
        lean.labels(level)
        for _ in range(times):
            reference.labels(level).inc()
            lean.labels(level).inc()
    reference.labels("Request").inc(2.5)
    lean.labels("Request").inc(2.5)
    assert generate_latest(ours) == generate_latest(theirs)


def test_nothing_observed_is_exposed_as_prometheus_client_does() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    Histogram("h_seconds", "h", ["a"], buckets=(1.0, 2.0), registry=theirs)
    LeanHistogram("h_seconds", "h", ("a",), buckets=(1.0, 2.0), registry=ours)
    assert generate_latest(ours) == generate_latest(theirs)


def test_gauge_exposition_is_prometheus_clients() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Gauge("apiserver_flowcontrol_current_executing_seats", "seats", ["priority_level", "flow_schema"],
                      registry=theirs)
    lean = LeanGauge("apiserver_flowcontrol_current_executing_seats", "seats", ("priority_level", "flow_schema"),
                     registry=ours)
    for gauge in (reference, lean):
        gauge.labels("catch-all", "catch-all").inc()
        gauge.labels("catch-all", "catch-all").inc(3)
        gauge.labels("catch-all", "catch-all").dec(2)
        gauge.labels("exempt", "exempt").set(7)
        gauge.labels("workload-low", "service-accounts").dec()  # below zero, as a bug would leave it
        gauge.labels("global-default", "global-default")
    assert generate_latest(ours) == generate_latest(theirs)
