"""handlers.watchmetrics: sends counted in a batch leave the metrics exactly as one observation per
send would, by the end of the loop turn (issue 15: one event to many watchers is one batch); the
series are the lean kinds, and what they expose is prometheus_client's Counter and Histogram text
for the same sends, one ``observe`` each."""

from __future__ import annotations

import asyncio

from genericapi.handlers import watchmetrics
from genericapi.leanmetrics import LeanCounter, LeanHistogram
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

LABELS = ("group", "version", "kind")
BUCKETS = tuple(1024.0 * 2 ** i for i in range(8))


def _lean(registry: CollectorRegistry, prefix: str) -> tuple[LeanCounter, LeanHistogram]:
    return (LeanCounter(f"{prefix}_events_total", "events", LABELS, registry=registry),
            LeanHistogram(f"{prefix}_events_sizes", "sizes", LABELS, BUCKETS, registry=registry))


def _reference(registry: CollectorRegistry, prefix: str) -> tuple[Counter, Histogram]:
    return (Counter(f"{prefix}_events_total", "events", list(LABELS), registry=registry),
            Histogram(f"{prefix}_events_sizes", "sizes", list(LABELS), registry=registry, buckets=BUCKETS))


def _exposition(registry: CollectorRegistry) -> list[bytes]:
    """The registry's text, without prometheus_client's creation times (kube has none; the services
    turn them off with disable_created_metrics, which this test cannot do for the whole process)."""
    return [line for line in generate_latest(registry).splitlines() if b"_created" not in line]


def _meter(count: LeanCounter, sizes: LeanHistogram, kind: str) -> watchmetrics.WatchEventMeter:
    meter = watchmetrics.WatchEventMeter.__new__(watchmetrics.WatchEventMeter)
    meter.count = count.labels("", "v1", kind)
    meter.sizes = sizes.labels("", "v1", kind)
    return meter


SENDS = [(b"x" * 700, "ConfigMap")] * 300 + [(b"y" * 5000, "ConfigMap")] * 7 + [(b"z" * 1024, "Pod")] * 3 \
    + [(b"q" * 300_000, "Pod")] * 2 + [(b"", "Secret")]  # past the last bucket (+Inf); empty


async def test_a_batch_reads_as_one_observation_per_send() -> None:
    batched_reg, single_reg, reference_reg = CollectorRegistry(), CollectorRegistry(), CollectorRegistry()
    b_count, b_sizes = _lean(batched_reg, "w")
    s_count, s_sizes = _lean(single_reg, "w")
    r_count, r_sizes = _reference(reference_reg, "w")
    for data, kind in SENDS:
        assert _meter(b_count, b_sizes, kind).sent_batched(data) is data
        assert _meter(s_count, s_sizes, kind).sent(data) is data
        r_count.labels("", "v1", kind).inc()
        r_sizes.labels("", "v1", kind).observe(len(data))
    assert watchmetrics._PENDING  # not added up yet: at the end of this loop turn
    await asyncio.sleep(0)
    assert not watchmetrics._PENDING
    assert _exposition(batched_reg) == _exposition(single_reg) == _exposition(reference_reg)
    assert b"w_events_total{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 307.0" in generate_latest(batched_reg)


def test_without_a_loop_it_adds_up_at_once() -> None:
    registry = CollectorRegistry()
    count, sizes = _lean(registry, "n")
    _meter(count, sizes, "Secret").sent_batched(b"abc")
    assert not watchmetrics._PENDING
    assert b"n_events_total{group=\"\",kind=\"Secret\",version=\"v1\"} 1.0" in generate_latest(registry)


def test_the_watch_series_are_defined_as_kube_defines_them() -> None:
    """WATCH_EVENTS/WATCH_EVENT_SIZES expose what prometheus_client's kinds with kube's names, help and
    buckets expose for the same updates (the definitions before they became lean)."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    ours.register(watchmetrics.WATCH_EVENTS)
    ours.register(watchmetrics.WATCH_EVENT_SIZES)
    before = generate_latest(ours)
    ref_count = Counter("apiserver_watch_events_total", "[ALPHA] Number of events sent in watch clients",
                        ["group", "version", "kind"], registry=theirs)
    ref_sizes = Histogram("apiserver_watch_events_sizes", "[ALPHA] Watch event size distribution in bytes",
                          ["group", "version", "kind"], buckets=tuple(1024.0 * 2 ** i for i in range(8)),
                          registry=theirs)
    # the process-wide series may hold other tests' sends: compare a kind no one else uses
    meter = watchmetrics.WatchEventMeter("example.com", "v9", "Unused")
    for size in (0, 1024, 1025, 200_000):
        meter.sent(b"x" * size)
        ref_count.labels("example.com", "v9", "Unused").inc()
        ref_sizes.labels("example.com", "v9", "Unused").observe(size)
    mine = [line for line in generate_latest(ours).splitlines() if b"Unused" in line or line.startswith(b"#")]
    reference = [line for line in generate_latest(theirs).splitlines()
                 if (b"Unused" in line or line.startswith(b"#")) and b"_created" not in line]
    assert mine == reference
    assert before != generate_latest(ours)
