"""``apiserver_audit_event_total`` is a lean counter (counted on every audit event, on the gateway's
event loop) exposed exactly as the prometheus_client Counter it replaced: the same ``/metrics`` lines
before any event (its one unlabelled series at 0) and after some."""

from __future__ import annotations

from aggregator.audit import sink
from genericapi.leanmetrics import LeanCounter
from prometheus_client import CollectorRegistry, Counter, generate_latest

from tests.unit.test_audit_backends import make_event

HELP = "Counter of audit events generated and sent to the audit backend."


def _text(registry: CollectorRegistry) -> list[bytes]:
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def test_audit_event_total_is_exposed_as_prometheus_clients_counter() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    ours.register(sink.EVENT_FAMILY)
    reference = Counter("apiserver_audit_event_total", HELP, registry=theirs)
    reference.inc(sink.EVENTS.value)  # what other tests in this process counted already
    assert _text(ours) == _text(theirs)
    assert any(line.startswith(b"apiserver_audit_event_total ") for line in _text(ours))

    audit = sink.AuditSink([], buffer_size=2)  # never started: two kept, the rest dropped, all counted
    for _ in range(3):
        audit.process(make_event().snapshot("ResponseComplete"))
        reference.inc()
    assert _text(ours) == _text(theirs)


def test_a_fresh_unlabelled_lean_counter_shows_its_zero() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    LeanCounter("x_total", "x", (), registry=ours).labels()
    Counter("x_total", "x", registry=theirs)
    assert _text(ours) == _text(theirs)
