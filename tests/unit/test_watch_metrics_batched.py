"""handlers.watchmetrics: sends counted in a batch leave the metrics exactly as one observation per
send would, by the end of the loop turn (issue 15: one event to many watchers is one batch)."""

from __future__ import annotations

import asyncio

from genericapi.handlers import watchmetrics
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest


def _pair(registry: CollectorRegistry, prefix: str) -> tuple[Counter, Histogram]:
    count = Counter(f"{prefix}_events_total", "events", ["group", "version", "kind"], registry=registry)
    sizes = Histogram(f"{prefix}_events_sizes", "sizes", ["group", "version", "kind"], registry=registry,
                      buckets=tuple(1024.0 * 2 ** i for i in range(8)))
    return count, sizes


def _exposition(registry: CollectorRegistry) -> list[bytes]:
    """The registry's text, without the children's creation times (the two registries differ there)."""
    return [line for line in generate_latest(registry).splitlines() if b"_created{" not in line]


def _meter(count: Counter, sizes: Histogram, kind: str) -> watchmetrics.WatchEventMeter:
    meter = watchmetrics.WatchEventMeter.__new__(watchmetrics.WatchEventMeter)
    meter.count = count.labels("", "v1", kind)
    meter.sizes = sizes.labels("", "v1", kind)
    return meter


async def test_a_batch_reads_as_one_observation_per_send() -> None:
    batched_reg, single_reg = CollectorRegistry(), CollectorRegistry()
    b_count, b_sizes = _pair(batched_reg, "w")
    s_count, s_sizes = _pair(single_reg, "w")
    sends = [(b"x" * 700, "ConfigMap")] * 300 + [(b"y" * 5000, "ConfigMap")] * 7 + [(b"z" * 1024, "Pod")] * 3 \
        + [(b"q" * 300_000, "Pod")] * 2  # past the last bucket (+Inf)
    for data, kind in sends:
        assert _meter(b_count, b_sizes, kind).sent_batched(data) is data
        _meter(s_count, s_sizes, kind).sent(data)
    assert watchmetrics._PENDING  # not added up yet: at the end of this loop turn
    await asyncio.sleep(0)
    assert not watchmetrics._PENDING
    assert _exposition(batched_reg) == _exposition(single_reg)
    assert b"w_events_total{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 307.0" in generate_latest(batched_reg)


def test_without_a_loop_it_adds_up_at_once() -> None:
    registry = CollectorRegistry()
    count, sizes = _pair(registry, "n")
    _meter(count, sizes, "Secret").sent_batched(b"abc")
    assert not watchmetrics._PENDING
    assert b"n_events_total{group=\"\",kind=\"Secret\",version=\"v1\"} 1.0" in generate_latest(registry)
